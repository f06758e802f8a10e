package controlplane_test

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"

	"github.com/nodeready/nodeready/e2e/framework/controlplane"
)

func parseGoMod(t *testing.T, path string) *modfile.File {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	mf, err := modfile.Parse(path, data, nil)
	require.NoError(t, err)
	return mf
}

// buildGoMods maps the go.mod of each module that scripts/build-control-plane.sh builds a
// control plane from (controlplane.BuildModules) to the release the tests expect of it.
func buildGoMods() map[string]string {
	mods := map[string]string{}
	for version, module := range controlplane.BuildModules {
		mods[filepath.Join("..", "..", "..", module, "go.mod")] = version
	}
	return mods
}

// The cache directory is named by KubernetesVersion (FloorKubernetesVersion); it must follow
// build/k8s/go.mod (build/k8s-1.32/go.mod), from which scripts/build-control-plane.sh builds
// the binaries, or the tests would look for binaries of another release.
func TestKubernetesVersionMatchesGoMod(t *testing.T) {
	require.ElementsMatch(t, controlplane.Releases, slices.Collect(maps.Keys(controlplane.BuildModules)))
	for path, version := range buildGoMods() {
		require.Equal(t, version, requiredKubernetes(t, path), path)
	}
}

func requiredKubernetes(t *testing.T, path string) string {
	t.Helper()
	for _, r := range parseGoMod(t, path).Require {
		if r.Mod.Path == "k8s.io/kubernetes" {
			return r.Mod.Version
		}
	}
	t.Fatal(path + " does not require k8s.io/kubernetes")
	return ""
}

// The floor is an older minor than the current release, or the version matrix would test
// one minor twice.
func TestFloorIsAnOlderMinor(t *testing.T) {
	require.Equal(t, -1, semver.Compare(semver.MajorMinor(controlplane.FloorKubernetesVersion), semver.MajorMinor(controlplane.KubernetesVersion)))
}

// The binaries are built with, and the tests talk to them through, the staging modules
// (client-go, api, apimachinery...) of that same release: v1.x.y ships them as v0.x.y. The
// e2e module's clients follow the current release.
func TestStagingModulesMatchKubernetesVersion(t *testing.T) {
	modules := map[string]string{"../../go.mod": controlplane.KubernetesVersion}
	maps.Copy(modules, buildGoMods())
	for path, version := range modules {
		staging := "v0" + strings.TrimPrefix(version, "v1")
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

// NODEREADY_E2E_KUBERNETES chooses the release and so the cache directory of its binaries;
// a release e2e/build does not build, or a second way to name the binaries, is refused.
func TestVersionOption(t *testing.T) {
	t.Setenv(controlplane.BinDirEnv, "")
	for _, tc := range []struct {
		value, want string
	}{
		{"", controlplane.KubernetesVersion},
		{controlplane.FloorKubernetesVersion, controlplane.FloorKubernetesVersion},
		{controlplane.KubernetesVersion, controlplane.KubernetesVersion},
		{controlplane.NewestKubernetesVersion, controlplane.NewestKubernetesVersion},
	} {
		t.Setenv(controlplane.VersionEnv, tc.value)
		v, err := controlplane.Version()
		require.NoError(t, err)
		require.Equal(t, tc.want, v)
		dir, err := controlplane.DefaultBinDir()
		require.NoError(t, err)
		require.True(t, strings.HasSuffix(dir, filepath.Join(".cache", "k8s", tc.want, "bin")), dir)
	}

	t.Setenv(controlplane.VersionEnv, "v1.30.0")
	_, err := controlplane.Version()
	require.EqualError(t, err, `NODEREADY_E2E_KUBERNETES="v1.30.0": not a release e2e/build builds; want one of v1.32.5, v1.36.3, v1.37.2`)
	_, err = controlplane.DefaultBinDir()
	require.Error(t, err)

	t.Setenv(controlplane.VersionEnv, controlplane.FloorKubernetesVersion)
	t.Setenv(controlplane.BinDirEnv, "/opt/k8s/bin")
	_, err = controlplane.DefaultBinDir()
	require.EqualError(t, err, "both NODEREADY_K8S_BIN and NODEREADY_E2E_KUBERNETES are set; set one")
}
