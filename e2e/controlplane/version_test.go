package controlplane_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/mod/modfile"

	"github.com/nodeready/nodeready/e2e/controlplane"
)

func parseGoMod(t *testing.T, path string) *modfile.File {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	mf, err := modfile.Parse(path, data, nil)
	require.NoError(t, err)
	return mf
}

// The cache directory is named by KubernetesVersion; it must follow k8s/go.mod, from which
// scripts/build-control-plane.sh builds the binaries, or the tests would look for binaries of
// another release.
func TestKubernetesVersionMatchesGoMod(t *testing.T) {
	const path = "../k8s/go.mod"
	for _, r := range parseGoMod(t, path).Require {
		if r.Mod.Path == "k8s.io/kubernetes" {
			require.Equal(t, r.Mod.Version, controlplane.KubernetesVersion)
			return
		}
	}
	t.Fatal(path + " does not require k8s.io/kubernetes")
}

// The binaries are built with, and the tests talk to them through, the staging modules
// (client-go, api, apimachinery...) of that same release: v1.x.y ships them as v0.x.y.
func TestStagingModulesMatchKubernetesVersion(t *testing.T) {
	staging := "v0" + strings.TrimPrefix(controlplane.KubernetesVersion, "v1")
	for _, path := range []string{"../go.mod", "../k8s/go.mod"} {
		replaced := map[string]bool{}
		for _, r := range parseGoMod(t, path).Replace {
			if !strings.HasPrefix(r.Old.Path, "k8s.io/") {
				continue
			}
			require.Equal(t, r.Old.Path, r.New.Path, "%s: replace of %s", path, r.Old.Path)
			require.Equal(t, staging, r.New.Version, "%s: replace of %s", path, r.Old.Path)
			replaced[r.Old.Path] = true
		}
		for _, m := range []string{"k8s.io/api", "k8s.io/apimachinery", "k8s.io/client-go"} {
			require.True(t, replaced[m], "%s does not replace %s", path, m)
		}
	}
}
