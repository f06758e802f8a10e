// Package karpenter runs the real Karpenter, built with its kwok cloud provider by
// scripts/build-karpenter.sh, against the e2e control plane: its CRDs, a KWOKNodeClass, and
// NodePools whose startupTaints hold nodeready's taint. Karpenter's kwok provider creates
// Node objects and nothing else; a harness.Fleet adopts them (Fleet.Adopt) and runs the real
// agent for every agent pod on them. TestKarpenter in e2e/suites/verify holds what nodeready
// assumes of Karpenter against Karpenter itself.
package karpenter

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeready/nodeready/e2e/framework/freeport"
	"github.com/nodeready/nodeready/e2e/framework/harness"
	"github.com/nodeready/nodeready/e2e/framework/process"
)

// Version is the Karpenter release that e2e/build/karpenter/go.mod pins (version_test.go
// holds them equal); scripts/build-karpenter.sh builds it into .cache/karpenter/<Version>.
const Version = "v1.14.1"

// BinEnv, when set, names the directory scripts/build-karpenter.sh printed (holding bin/ and
// crds/), instead of <repo>/.cache/karpenter/<Version>.
const BinEnv = "NODEREADY_KARPENTER_DIR"

// NodeClass is the KWOKNodeClass every NodePool of the tests names.
const NodeClass = "default"

// Batch windows: how long Karpenter gathers pending pods before it launches nodes for them.
// Its defaults (1 s idle, 10 s max) are for real clouds; here they only slow the tests.
const (
	batchIdle = 200 * time.Millisecond
	batchMax  = 2 * time.Second
)

// startTimeout bounds Karpenter's start, CRDs included.
const startTimeout = 2 * time.Minute

// Karpenter is a running Karpenter process.
type Karpenter struct {
	proc *process.Process
}

// Dir returns the directory that holds Karpenter's bin/karpenter and crds/.
func Dir(c *harness.Cluster) string {
	if d := os.Getenv(BinEnv); d != "" {
		return d
	}
	return filepath.Join(c.RepoRoot(), ".cache", "karpenter", Version)
}

// Start installs Karpenter's CRDs and the KWOKNodeClass into the cluster and starts
// Karpenter, with the cluster admin's kubeconfig and its log in <cluster logs>/karpenter.log.
// It returns once Karpenter reports ready.
func Start(ctx context.Context, c *harness.Cluster) (*Karpenter, error) {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	dir := Dir(c)
	bin := filepath.Join(dir, "bin", "karpenter")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("karpenter: %w; run scripts/build-karpenter.sh (or make e2e)", err)
	}
	// Server-side: the NodePool CRD is too large for kubectl's last-applied annotation.
	if _, err := c.Kubectl(ctx, "apply", "--server-side", "-f", filepath.Join(dir, "crds")); err != nil {
		return nil, err
	}
	for _, crd := range []string{"nodepools.karpenter.sh", "nodeclaims.karpenter.sh", "kwoknodeclasses.karpenter.kwok.sh"} {
		if _, err := c.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=60s", "crd/"+crd); err != nil {
			return nil, err
		}
	}
	if err := createNodeClass(ctx, c); err != nil {
		return nil, err
	}

	ports, err := freeport.Ports(2)
	if err != nil {
		return nil, fmt.Errorf("karpenter: %w", err)
	}
	logPath := filepath.Join(c.LogDir(), "karpenter.log")
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(),
		"KUBECONFIG="+c.ControlPlane().Kubeconfig(),
		// One Karpenter, outside the cluster: no leader election, no webhooks.
		"DISABLE_LEADER_ELECTION=true",
		"SYSTEM_NAMESPACE="+harness.Namespace,
		"METRICS_PORT="+strconv.Itoa(ports[0]),
		"HEALTH_PROBE_PORT="+strconv.Itoa(ports[1]),
		"BATCH_IDLE_DURATION="+batchIdle.String(),
		"BATCH_MAX_DURATION="+batchMax.String(),
		"LOG_LEVEL=debug",
	)
	proc, err := process.Start(cmd, process.Options{Name: "karpenter", LogPath: logPath})
	if err != nil {
		return nil, fmt.Errorf("karpenter: %w", err)
	}
	k := &Karpenter{proc: proc}
	ready := fmt.Sprintf("http://127.0.0.1:%d/readyz", ports[1])
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := proc.ExitError(); err != nil {
			return false, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, ready, nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		k.Stop()
		return nil, fmt.Errorf("karpenter not ready (log %s): %w", logPath, err)
	}
	return k, nil
}

// LogPath returns Karpenter's log file.
func (k *Karpenter) LogPath() string { return k.proc.LogPath }

// Pause stops the Karpenter process (SIGSTOP) until Resume: whatever it was about to write,
// such as a registration, waits.
func (k *Karpenter) Pause() error { return k.proc.Cmd.Process.Signal(syscall.SIGSTOP) }

// Resume continues a paused Karpenter.
func (k *Karpenter) Resume() error { return k.proc.Cmd.Process.Signal(syscall.SIGCONT) }

// Stop ends Karpenter: SIGTERM, then SIGKILL after 10 s. It is idempotent.
func (k *Karpenter) Stop() {
	if !k.proc.Exited() {
		_ = k.proc.Cmd.Process.Signal(syscall.SIGCONT) // a paused Karpenter could not act on SIGTERM
	}
	k.proc.Stop(10*time.Second, nil)
}
