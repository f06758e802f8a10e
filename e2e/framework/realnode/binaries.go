package realnode

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/nodeready/nodeready/e2e/framework/controlplane"
)

// Environment variables that say where scripts/build-node.sh put the binaries.
const (
	ContainerdBinEnv = "NODEREADY_CONTAINERD_BIN"
	CoreDNSBinEnv    = "NODEREADY_COREDNS_BIN"
)

// Binaries returns the directories of kubelet and kube-proxy, and of containerd: the given
// ones, else the control plane's bin directory and $NODEREADY_CONTAINERD_BIN or the newest
// .cache/containerd/*/bin of the repository.
func Binaries(k8sBin, containerdBin string) (string, string, error) {
	var err error
	if k8sBin == "" {
		if k8sBin, err = controlplane.DefaultBinDir(); err != nil {
			return "", "", err
		}
	}
	if containerdBin == "" {
		if containerdBin, err = cached(ContainerdBinEnv, "containerd"); err != nil {
			return "", "", err
		}
	}
	for _, f := range []string{filepath.Join(k8sBin, "kubelet"), filepath.Join(k8sBin, "kube-proxy"),
		filepath.Join(containerdBin, "containerd"), filepath.Join(containerdBin, "containerd-shim-runc-v2")} {
		if _, err := os.Stat(f); err != nil {
			return "", "", fmt.Errorf("real node binaries: %w; build them with scripts/build-node.sh", err)
		}
	}
	return k8sBin, containerdBin, nil
}

// CoreDNSBinary returns the path of the coredns binary scripts/build-node.sh built.
func CoreDNSBinary() (string, error) {
	dir, err := cached(CoreDNSBinEnv, "coredns")
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "coredns"), nil
}

// cached returns $env, or the last (newest version) .cache/<name>/*/bin of the repository.
func cached(env, name string) (string, error) {
	if dir := os.Getenv(env); dir != "" {
		return dir, nil
	}
	k8sBin, err := controlplane.DefaultBinDir()
	if err != nil {
		return "", err
	}
	// k8sBin is <repo>/.cache/k8s/<version>/bin.
	cache := filepath.Dir(filepath.Dir(filepath.Dir(k8sBin)))
	dirs, _ := filepath.Glob(filepath.Join(cache, name, "*", "bin"))
	if len(dirs) == 0 {
		return "", fmt.Errorf("no %s in %s: build it with scripts/build-node.sh, or set %s", name, cache, env)
	}
	return dirs[len(dirs)-1], nil
}
