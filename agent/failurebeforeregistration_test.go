package agent

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeready/nodeready/config"
	"github.com/nodeready/nodeready/nodepatch"
)

// TestFailureBeforeRegistration: a Karpenter node whose checks fail before
// Karpenter registered it is not known to be held yet. The failure is
// recorded and says the action waits; once Karpenter registers the node with
// its startup taint, the action runs.
func TestFailureBeforeRegistration(t *testing.T) {
	node := &fakeNode{}
	node.set(nodepatch.ErrNotRegistered)
	broken := &fakeCheck{name: "dns"}
	broken.fail.Store(true)
	a := testAgent(t, node, broken)
	a.cfg.MaxRetries = 1
	a.cfg.FailureAction = config.ReplaceNode
	_, _ = runAgent(t, a)

	waitFor(t, "failure recorded", func() bool { return testutil.ToFloat64(a.metrics.failures) == 1 })
	waitFor(t, "rounds go on", func() bool { return broken.runs.Load() >= 3 })
	assert.Zero(t, node.replaced(), "not replaced before the registration")
	failed := eventsWith(recorder(a), "Warning VerificationFailed")
	require.Len(t, failed, 1)
	assert.Contains(t, failed[0], "failure action: none yet, the node's state is not known")

	node.set(nil) // Karpenter registered the node, with the startup taint
	waitFor(t, "replaced once registered", func() bool { return node.replaced() == 1 })
}
