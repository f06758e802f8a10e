package release

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeready/nodeready/e2e/framework"
)

// TestReleaseReproducible: `make release` in two fresh clones of the checkout's commit, at
// different paths and at different times, gives the same image digest and the same SHA256SUMS, which
// covers every file of the release, and each SHA256SUMS holds for its files.
func TestReleaseReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the release twice")
	}
	root := framework.RepoRoot(t)
	version := releaseVersion(t, root)
	helm := filepath.Join(root, ".cache", "tools", "helm", "bin", "helm")
	if _, err := os.Stat(helm); err != nil {
		t.Fatalf("helm: %v; run make tools (scripts/build-tools.sh helm) to build it", err)
	}
	// One commit for both: others may commit to the checkout while the first build runs.
	rev, err := exec.CommandContext(t.Context(), "git", "-C", root, "rev-parse", "HEAD").Output()
	require.NoError(t, err)
	build := func(name string) (digest, sums string) {
		t.Helper()
		clone := filepath.Join(t.TempDir(), name)
		out, err := exec.CommandContext(t.Context(), "git", "clone", "--quiet", "--no-hardlinks", "--no-checkout", root, clone).CombinedOutput()
		require.NoError(t, err, "git clone: %s", out)
		out, err = exec.CommandContext(t.Context(), "git", "-C", clone, "checkout", "--quiet", strings.TrimSpace(string(rev))).CombinedOutput()
		require.NoError(t, err, "git checkout: %s", out)
		// HELM: the one built for this checkout, not a build of it in each clone.
		cmd := exec.CommandContext(t.Context(), "make", "--no-print-directory", "release", "VERSION="+version, "HELM="+helm)
		cmd.Dir = clone
		cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
			name, _, _ := strings.Cut(kv, "=")
			return slices.Contains([]string{"REGISTRY", "DIST", "REVISION", "SOURCE_DATE_EPOCH", "MAKEFLAGS", "MFLAGS", "MAKELEVEL"}, name)
		})
		out, err = cmd.CombinedOutput()
		require.NoError(t, err, "make release:\n%s", out)
		check := exec.CommandContext(t.Context(), "sha256sum", "--check", "--strict", "SHA256SUMS")
		check.Dir = filepath.Join(clone, "dist")
		out, err = check.CombinedOutput()
		require.NoError(t, err, "sha256sum --check: %s", out)
		d, err := os.ReadFile(filepath.Join(clone, "dist", "image.digest"))
		require.NoError(t, err)
		s, err := os.ReadFile(filepath.Join(clone, "dist", "SHA256SUMS"))
		require.NoError(t, err)
		return string(d), string(s)
	}
	digest, sums := build("first")
	digest2, sums2 := build("second")
	assert.Equal(t, digest, digest2, "the image's digest")
	assert.Equal(t, sums, sums2, "SHA256SUMS")
	for _, f := range []string{"install.yaml", "nodeready-" + strings.TrimPrefix(version, "v") + ".tgz", "nodeready.spdx.json",
		"nodeready.yaml", "image.digest", "kubectl-nodeready_" + version + "_linux_amd64.tar.gz"} {
		assert.Contains(t, sums, "  "+f+"\n", "SHA256SUMS covers %s", f)
	}
}
