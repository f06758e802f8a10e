package harness

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nodeready/nodeready/e2e/framework/process"
)

// LogsEnv, when set, names a directory where StartForTest keeps every log, also after a
// passing run: one nodeready-e2e-* directory per cluster.
const LogsEnv = "NODEREADY_E2E_LOGS"

// startForTestTimeout bounds StartForTest's startup: the control plane and the install.
const startForTestTimeout = 5 * time.Minute

// StartForTest starts a cluster for a test or benchmark and stops it at cleanup; a failure
// to start fails t. Options.Logf defaults to t.Logf. When opts.LogDir is empty, the logs go to
// a new directory, under $NODEREADY_E2E_LOGS if set, that is removed after a passing test
// (unless $NODEREADY_E2E_LOGS is set) and kept, with its path and the end of the API server
// log reported, after a failing one.
func StartForTest(t testing.TB, opts Options) *Cluster {
	t.Helper()
	keep := os.Getenv(LogsEnv)
	ownLogDir := opts.LogDir == ""
	if ownLogDir {
		if keep != "" {
			if err := os.MkdirAll(keep, 0o755); err != nil {
				t.Fatalf("create log dir: %v", err)
			}
		}
		dir, err := os.MkdirTemp(keep, "nodeready-e2e-")
		if err != nil {
			t.Fatalf("create log dir: %v", err)
		}
		opts.LogDir = dir
	}
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}

	ctx, cancel := context.WithTimeout(t.Context(), startForTestTimeout)
	defer cancel()
	c, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("start cluster (logs in %s): %v", opts.LogDir, err)
	}
	c.keepLogs = !ownLogDir || keep != ""
	t.Cleanup(func() {
		if !t.Failed() {
			c.Stop()
			if c.keepLogs {
				t.Logf("logs kept in %s", c.LogDir())
				return
			}
			os.RemoveAll(c.LogDir())
			return
		}
		// Read the log before Stop, which would add the shutdown messages to its end.
		apiServerLog := filepath.Join(c.ControlPlane().LogDir(), "kube-apiserver.log")
		tail := process.Tail(apiServerLog, 40)
		c.Stop()
		t.Logf("logs kept in %s; last lines of %s:\n%s", c.LogDir(), apiServerLog, tail)
	})
	return c
}

// NewFleetForTest starts a fleet for a test and stops it at cleanup, removing its nodes; a
// failure to start fails t. After a failing test it reports the fleet's nodes and pods and
// keeps the agent and kubelet logs; after a passing one it removes them, unless the cluster
// keeps every log (see StartForTest).
func NewFleetForTest(t testing.TB, c *Cluster, name string) *Fleet {
	t.Helper()
	f, err := c.NewFleet(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			t.Logf("fleet %s:\n%s", name, f.Describe(ctx))
			cancel()
		}
		if err := f.Stop(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		if t.Failed() || c.keepLogs {
			t.Logf("agent and kubelet logs kept in %s", f.LogDir())
			return
		}
		f.removeLogs()
	})
	return f
}
