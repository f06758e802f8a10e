package controlplane

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// KubernetesVersion is the release that e2e/build/k8s/go.mod pins and
// scripts/build-control-plane.sh builds; it names the cache directory of the binaries.
const KubernetesVersion = "v1.36.3"

// FloorKubernetesVersion is the oldest release the README supports, which e2e/build/k8s-1.32/go.mod
// pins and `scripts/build-control-plane.sh e2e/build/k8s-1.32` builds; make e2e-versions runs the
// core scenarios against it as well as against KubernetesVersion, and Options.Kubernetes of
// e2e/framework chooses it for what only it refuses or lacks.
const FloorKubernetesVersion = "v1.32.5"

// NewestKubernetesVersion is the newest release, newer than the one everything else runs on, which
// e2e/build/k8s-1.37/go.mod pins and `scripts/build-control-plane.sh e2e/build/k8s-1.37` builds;
// make e2e-versions runs the core scenarios against it too. Only its kube-apiserver is built:
// its bin directory links etcd, kube-controller-manager, kube-scheduler and kubectl of
// KubernetesVersion, one minor older, as in a control plane being upgraded.
const NewestKubernetesVersion = "v1.37.2"

// BuildModules maps each release of Releases to the module, relative to the repository root,
// that scripts/build-control-plane.sh builds its control plane from.
var BuildModules = map[string]string{
	KubernetesVersion:       "e2e/build/k8s",
	FloorKubernetesVersion:  "e2e/build/k8s-1.32",
	NewestKubernetesVersion: "e2e/build/k8s-1.37",
}

// VersionEnv chooses the Kubernetes release every e2e control plane runs that names no
// binaries of its own (Options.BinDir), and so the version its simulated kubelets report: one
// of Releases, KubernetesVersion when unset. make e2e-versions runs the core suites with it set
// to each other release.
const VersionEnv = "NODEREADY_E2E_KUBERNETES"

// Releases are the releases e2e/build builds control planes of, oldest first.
var Releases = []string{FloorKubernetesVersion, KubernetesVersion, NewestKubernetesVersion}

// BinDirEnv overrides where the control plane binaries are looked up.
const BinDirEnv = "NODEREADY_K8S_BIN"

// Version returns the release $NODEREADY_E2E_KUBERNETES chooses, or KubernetesVersion.
func Version() (string, error) {
	v := os.Getenv(VersionEnv)
	if v == "" {
		return KubernetesVersion, nil
	}
	if !slices.Contains(Releases, v) {
		return "", fmt.Errorf("%s=%q: not a release e2e/build builds; want one of %s", VersionEnv, v, strings.Join(Releases, ", "))
	}
	return v, nil
}

// DefaultBinDir returns $NODEREADY_K8S_BIN, or else <repo>/.cache/k8s/<version>/bin of the
// repository that contains the working directory, where scripts/build-control-plane.sh
// puts the binaries, for the release Version chooses. Setting both variables is an error: the
// release would be the binaries', not the one asked for.
func DefaultBinDir() (string, error) {
	if dir := os.Getenv(BinDirEnv); dir != "" {
		if os.Getenv(VersionEnv) != "" {
			return "", fmt.Errorf("both %s and %s are set; set one", BinDirEnv, VersionEnv)
		}
		return dir, nil
	}
	v, err := Version()
	if err != nil {
		return "", err
	}
	return BinDirFor(v)
}

// BinDirFor returns <repo>/.cache/k8s/<version>/bin, where scripts/build-control-plane.sh
// puts the binaries of that release; $NODEREADY_K8S_BIN does not apply.
func BinDirFor(version string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", fmt.Errorf("%w; or set %s", err, BinDirEnv)
	}
	return filepath.Join(root, ".cache", "k8s", version, "bin"), nil
}

// RepoRoot walks up from the working directory to the repository that holds
// scripts/build-control-plane.sh (and manifests/): the tests, the demo and the benchmarks run
// from inside it.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find repository root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "scripts", "build-control-plane.sh")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find repository root: no scripts/build-control-plane.sh above the working directory")
		}
		dir = parent
	}
}

// checkBinaries fails with instructions when the control plane binaries are missing.
func checkBinaries(binDir string) error {
	for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		if _, err := os.Stat(filepath.Join(binDir, name)); err != nil {
			return fmt.Errorf("control plane binaries: %w; build them once with make control-plane (scripts/build-control-plane.sh [MODULE]), which takes a few minutes", err)
		}
	}
	return nil
}

// Build runs scripts/build-control-plane.sh for version, which returns at once when its
// binaries are up to date and waits for a build of them already under way (make e2e builds
// the other releases beside the first suites), and returns their directory, BinDirFor's.
func Build(version string) (string, error) {
	module, ok := BuildModules[version]
	if !ok {
		return "", fmt.Errorf("no module builds Kubernetes %s; want one of %s", version, strings.Join(Releases, ", "))
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(filepath.Join(root, "scripts", "build-control-plane.sh"), module)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if _, err := cmd.Output(); err != nil {
		return "", fmt.Errorf("scripts/build-control-plane.sh %s: %w\n%s", module, err, stderr.String())
	}
	return BinDirFor(version)
}
