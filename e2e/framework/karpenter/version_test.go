package karpenter

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/mod/modfile"
)

// The cache directory is named by Version; it must follow build/karpenter/go.mod, from which
// scripts/build-karpenter.sh builds the binary, or the tests would look for another release.
func TestVersionMatchesGoMod(t *testing.T) {
	const path = "../../build/karpenter/go.mod"
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	mf, err := modfile.Parse(path, data, nil)
	require.NoError(t, err)
	for _, r := range mf.Require {
		if r.Mod.Path == "sigs.k8s.io/karpenter" {
			require.Equal(t, r.Mod.Version, Version)
			return
		}
	}
	t.Fatal(path + " does not require sigs.k8s.io/karpenter")
}
