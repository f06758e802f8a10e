// Command kubectl-nodeready is the kubectl plugin `kubectl nodeready`: every node as
// nodeready sees it, why one is held, and releasing or re-verifying one by hand. Its logic
// is in internal/plugin; kubectl finds it on the PATH by its name.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/nodeready/nodeready/cmd/kubectl-nodeready/internal/plugin"
)

// Set by the Makefile's -ldflags, as the agent's are.
var (
	version  = "dev"
	revision = "unknown"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd := plugin.NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}, version+" ("+revision+")")
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		if errors.Is(err, plugin.ErrRefused) {
			os.Exit(3)
		}
		os.Exit(1)
	}
}
