package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// PluginBinaryEnv names the built kubectl plugin (cmd/kubectl-nodeready) that the e2e tests
// and the demo run as a user would; make e2e and make demo set it after make plugin.
const PluginBinaryEnv = "NODEREADY_PLUGIN_BIN"

// PluginBinary returns the kubectl plugin to run: PluginBinaryEnv's, else one built from the
// repository at root into dir with go build, as make plugin builds it.
func PluginBinary(ctx context.Context, root, dir string) (string, error) {
	if bin := os.Getenv(PluginBinaryEnv); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("kubectl plugin %s (%s): %w; run make plugin", bin, PluginBinaryEnv, err)
		}
		return bin, nil
	}
	bin := filepath.Join(dir, "kubectl-nodeready")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./cmd/kubectl-nodeready")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/kubectl-nodeready: %w: %s", err, out)
	}
	return bin, nil
}
