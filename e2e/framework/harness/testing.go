package harness

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

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

// NewFleetWithNodeForTest is NewFleetForTest with one node, <name>-0, added with o; it
// returns the fleet and the node's name. A failure fails t.
func NewFleetWithNodeForTest(t testing.TB, c *Cluster, name string, o NodeOptions) (*Fleet, string) {
	t.Helper()
	f := NewFleetForTest(t, c, name)
	node := f.Name() + "-0"
	if err := f.AddNode(t.Context(), node, o); err != nil {
		t.Fatal(err)
	}
	return f, node
}

// Poll calls cond every PollInterval until it is done, bounded by WaitTimeout and the test.
func Poll(t testing.TB, cond wait.ConditionWithContextFunc) error {
	t.Helper()
	return poll(t.Context(), cond)
}

// RequireNode returns the node as the API server has it; a failed read fails t.
func RequireNode(t testing.TB, c *Cluster, name string) *corev1.Node {
	t.Helper()
	n, err := c.Client().CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get node %s: %v", name, err)
	}
	return n
}

// RequireAgentCondition waits until the node reports the agent's condition with reason;
// a timeout fails t.
func RequireAgentCondition(t testing.TB, c *Cluster, node, reason string) corev1.NodeCondition {
	t.Helper()
	cond, err := c.WaitAgentCondition(t.Context(), node, reason)
	if err != nil {
		t.Fatal(err)
	}
	return cond
}

// RequireNodeEvent waits for an Event about the node with the reason (the agent sends
// Events asynchronously) and returns the first; a timeout fails t.
func RequireNodeEvent(t testing.TB, c *Cluster, node, reason string) eventsv1.Event {
	t.Helper()
	var found []eventsv1.Event
	err := Poll(t, func(ctx context.Context) (bool, error) {
		var err error
		found, err = c.NodeEvents(ctx, node, reason)
		return err == nil && len(found) > 0, nil
	})
	if err != nil {
		t.Fatalf("no %s Event about node %s: %v", reason, node, err)
	}
	return found[0]
}

// RequireNoNodeEvent fails t when an Event about the node has the reason.
func RequireNoNodeEvent(t testing.TB, c *Cluster, node, reason string) {
	t.Helper()
	found, err := c.NodeEvents(t.Context(), node, reason)
	if err != nil {
		t.Fatalf("list %s Events about node %s: %v", reason, node, err)
	}
	if len(found) > 0 {
		t.Fatalf("%d %s Events about node %s, want none: first %q", len(found), reason, node, found[0].Note)
	}
}

// RepoRootForTest is FindRepoRoot for a test, which fails without the repository.
func RepoRootForTest(t testing.TB) string {
	t.Helper()
	root, err := FindRepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}
