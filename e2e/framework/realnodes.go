package framework

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/nodeready/nodeready/e2e/framework/realnode"
)

// startRealNodes starts the control plane and the first o.Start real nodes of a cluster with
// o (its LogDir and Logf are the test's), skipping t where real nodes cannot run; at the end
// it stops them and asserts the machine is as it was. The logs are kept when the test fails.
func startRealNodes(t *testing.T, o RealNodes) *realnode.Cluster {
	t.Helper()
	requireRoot(t)
	logDir, err := os.MkdirTemp("", "nodeready-realnode-logs-")
	if err != nil {
		t.Fatal(err)
	}
	// One node starts in about a minute; a set waits for the machine-wide lock and flannel.
	timeout := 5 * time.Minute
	if o.Nodes > 1 {
		timeout = 8 * time.Minute
	}
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	begin := time.Now()
	opts := o.ClusterOptions
	opts.LogDir, opts.Logf = logDir, t.Logf
	c, err := realnode.StartCluster(ctx, opts)
	if err != nil {
		t.Fatalf("start real nodes (logs in %s): %v", logDir, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := c.Kubectl(context.Background(), "get", "nodes,pods,events", "-A", "-o", "wide")
			t.Logf("cluster at failure:\n%s", out)
		}
		if err := c.Stop(); err != nil {
			t.Errorf("stop real nodes: %v", err)
		}
		assert.Equal(t, c.MachineBefore(), c.MachineAfter(), "the machine as it was before the real nodes")
		if t.Failed() {
			t.Logf("logs kept in %s", logDir)
			return
		}
		os.RemoveAll(logDir)
	})
	if o.Start == 0 {
		return c
	}
	t.Logf("Control plane, registry and images in %s", time.Since(begin).Round(time.Millisecond))
	for i := range o.Start {
		if err := c.StartNodeAt(ctx, i); err != nil {
			t.Fatalf("logs in %s: %v", logDir, err)
		}
	}
	t.Logf("%d of %d nodes up in %s", o.Start, len(c.Nodes), time.Since(begin).Round(time.Millisecond))
	return c
}
