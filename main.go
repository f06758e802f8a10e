// Command nodeready verifies a new Kubernetes node and releases it for
// workloads: see README.md. main is wiring only: flags, configuration,
// logger, client and exit code.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/nodeready/nodeready/agent"
	"github.com/nodeready/nodeready/internal/config"
	"github.com/nodeready/nodeready/internal/wiring"
	"github.com/nodeready/nodeready/internal/wiring/sigterm"
)

// Set with -ldflags "-X main.version=... -X main.revision=...".
var (
	version  = "dev"
	revision = "unknown"
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1 // dry-run checks failed, or the agent could not start
	exitConfig = 2 // bad flags or environment
)

func main() {
	started := time.Now()
	// SIGTERM and SIGINT are caught from the process's start, long before
	// main: a pod deleted while its agent starts still aborts cleanly.
	ctx, stop := sigterm.NotifyContext(context.Background())
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr, newClient, started))
}

// newClientFunc builds the Kubernetes clients, which log to log; tests
// count its calls to prove that bad configuration stops the agent before any
// client exists.
type newClientFunc func(dryRun bool, log zerolog.Logger) (agent.Clients, error)

func run(ctx context.Context, args []string, stdout, stderr io.Writer, newClient newClientFunc, started time.Time) int {
	// The init containers of the pre-pull variant (manifests/variants/prepull)
	// and the probes need no configuration, so their subcommands come before it.
	if len(args) > 0 {
		switch args[0] {
		case "noop":
			return exitOK
		case "copy-binary":
			return copyBinary(args[1:], stderr)
		case "probe":
			return probe(args[1:], stderr)
		case "uninstall":
			return uninstallCommand(ctx, args[1:], stderr, newClient)
		}
	}
	fs := flag.NewFlagSet("nodeready", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dryRun := fs.Bool("dry-run", false, "run every check that can run from here once, print a table, write nothing")
	showVersion := fs.Bool("version", false, "print the version and exit")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: nodeready [--dry-run | --version | noop | copy-binary PATH | probe healthz|readyz | uninstall -h]\n\n"+
			"Verifies this node and releases it for workloads. Configured through environment\n"+
			"variables only:\n\n")
		config.PrintVariables(stderr)
		fmt.Fprintf(stderr, "\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitConfig
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "nodeready: unexpected argument %q\n", fs.Arg(0))
		return exitConfig
	}
	if *showVersion {
		fmt.Fprintf(stdout, "nodeready %s (revision %s, %s)\n", version, revision, runtime.Version())
		return exitOK
	}

	cfg, err := config.Load(*dryRun)
	if err != nil {
		printConfigError(stderr, err)
		return exitConfig
	}
	log := wiring.NewLogger(cfg, stderr)
	if cfg.ReadOnly {
		log = log.With().Bool("dry_run", true).Logger() // DRY_RUN=true: every line says so
	}
	wiring.RouteClientGoLogs(log)
	for _, w := range cfg.Warnings(os.Environ()) {
		log.Warn().Str("variable", w.Var).Str("hint", w.Hint).Msg(w.Message)
	}

	clients, err := newClient(*dryRun, log)
	if err != nil {
		log.Error().Err(err).Msg("Could not create Kubernetes client")
		return exitFailed
	}
	if *dryRun {
		return agent.DryRun(ctx, cfg, clients.Kube, stdout)
	}
	if clients.Kube == nil {
		log.Error().Msg("No Kubernetes configuration: set KUBECONFIG, or run in a pod")
		return exitFailed
	}
	a, err := agent.New(cfg, log, clients, agent.BuildInfo{Version: version, Revision: revision}, started)
	if err == nil {
		err = a.Run(ctx)
	}
	if err != nil {
		log.Error().Err(err).Msg("Agent failed to start")
		return exitFailed
	}
	return exitOK
}

// printConfigError writes what config.Load refused: one line for each bad
// variable (config.Errors), every one at once.
func printConfigError(w io.Writer, err error) {
	for line := range strings.SplitSeq(err.Error(), "\n") {
		fmt.Fprintf(w, "nodeready: %s\n", line)
	}
}

// newClient builds the clients from wiring.RestConfig, or none in dry-run
// without a configuration. The API server's warnings go to log.
func newClient(dryRun bool, log zerolog.Logger) (agent.Clients, error) {
	cfg, err := wiring.RestConfig(dryRun)
	if err != nil || cfg == nil {
		return agent.Clients{}, err
	}
	cfg.UserAgent = "nodeready/" + version
	cfg.WarningHandler = wiring.WarningHandler(log)
	return wiring.NewClients(cfg)
}
