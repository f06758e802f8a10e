package agent

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodeready/nodeready/internal/config"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// unregistered is node-a as Karpenter's node before Karpenter registered it.
func unregistered(n *corev1.Node) *corev1.Node {
	n.Labels["karpenter.sh/nodepool"] = "default"
	return n
}

// register does what Karpenter's registration does to node-a: its label, its startup taint
// and its NodeClaim as owner.
func register(t *testing.T, c *cluster) {
	t.Helper()
	owned := ownedNode()
	c.editNode(t, func(n *corev1.Node) {
		n.Labels["karpenter.sh/registered"] = "true"
		n.Spec.Taints = owned.Spec.Taints
		n.OwnerReferences = owned.OwnerReferences
	})
}

// TestWaitingForKarpenterIsNotFailing: a Karpenter node that Karpenter has not registered
// yet is not released, and the waiting is never recorded as a failed verification nor
// brings on the failure action, however many rounds it takes; once Karpenter registers the
// node, it is released.
func TestWaitingForKarpenterIsNotFailing(t *testing.T) {
	c := newCluster(unregistered(heldNode()))
	r := runNew(t, c, passing, map[string]string{"MAX_RETRIES": "2", "FAILURE_ACTION": config.ReplaceNode})

	waitFor(t, "rounds beyond MAX_RETRIES", func() bool { return rounds(r.Agent) >= 6 })
	assert.False(t, isVerified(r.Agent))
	assert.Zero(t, failures(r.Agent), "waiting is failing")
	assert.Zero(t, c.writes(), "a write while waiting: release, condition or deletion")
	assert.Empty(t, c.events(t), "an Event while waiting")

	register(t, c)
	waitFor(t, "released once registered", func() bool { return isVerified(r.Agent) })
	assert.Equal(t, []corev1.Taint{otherTaint}, c.node(t).Spec.Taints)
	assert.Equal(t, []string{string(wellknown.Verified)}, c.reasons())
	require.NoError(t, r.stop(t))
	assert.Equal(t, []string{"Verified"}, c.eventReasons(t))
}

// TestFailureBeforeRegistration: a Karpenter node whose checks fail before Karpenter
// registered it is not known to be held yet. The failure is recorded and says the action
// waits; once Karpenter registers the node with its startup taint, the action runs.
func TestFailureBeforeRegistration(t *testing.T) {
	node := unregistered(heldNode())
	node.Spec.Taints = []corev1.Taint{otherTaint}
	c, dyn := newCluster(node), nodeClaims()
	r := start(t, c.peered(t, newAgent(t, Clients{Kube: c.kube(), Dynamic: dyn}, failing, map[string]string{"MAX_RETRIES": "1", "FAILURE_ACTION": config.ReplaceNode})))

	waitFor(t, "failure recorded", func() bool { return failures(r.Agent) == 1 })
	waitFor(t, "rounds go on", func() bool { return rounds(r.Agent) >= 3 })
	assert.Zero(t, deletes(dyn), "replaced before the registration")
	assert.Contains(t, c.waitEvent(t, wellknown.VerificationFailed).Note, "failure action: none yet, the node's state is not known")

	register(t, c)
	waitFor(t, "replaced once registered", func() bool { return c.condition(t).Reason == string(wellknown.Replacing) })
	assert.Equal(t, 1, deletes(dyn))
	require.NoError(t, r.stop(t))
	c.emittedOnce(t, wellknown.VerificationFailed)
	c.emittedOnce(t, wellknown.ReplacingNode)
}
