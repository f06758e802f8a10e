package framework

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// BuildTool builds a test tool (promtool, prometheus, ...) with scripts/build-tools.sh,
// which returns at once when the tool is up to date, and returns the binary's path.
func BuildTool(t testing.TB, name string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(RepoRoot(t), "scripts", "build-tools.sh"), name)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/build-tools.sh %s: %v\n%s", name, err, stderr.String())
	}
	return filepath.Join(strings.TrimSpace(string(out)), name)
}
