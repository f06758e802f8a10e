package controlplane

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// kubectlTimeout bounds one kubectl command, so that a hung one fails the test that ran it.
const kubectlTimeout = time.Minute

// Kubectl runs the kubectl built with the control plane (scripts/build-control-plane.sh), as
// the cluster admin unless args say otherwise (--as), with stdin as its input (nil for none).
// It returns the combined output, which the error holds too.
func (cp *ControlPlane) Kubectl(ctx context.Context, stdin io.Reader, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, kubectlTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(cp.binDir, "kubectl"), append([]string{"--kubeconfig", cp.Kubeconfig()}, args...)...)
	var out bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}
