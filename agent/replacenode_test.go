package agent

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/nodeready/nodeready/internal/config"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// TestReplaceUnclaimedNodeSaysWhatHappens: without a Karpenter NodeClaim, replace-node deletes
// the Node object, which replaces nothing; the Event says so, so nobody waits for a new node
// that no autoscaler will bring.
func TestReplaceUnclaimedNodeSaysWhatHappens(t *testing.T) {
	c, dyn := newCluster(heldNode()), nodeClaims()
	start(t, c.peered(t, newAgent(t, Clients{Kube: c.kube(), Dynamic: dyn}, failing, map[string]string{"MAX_RETRIES": "1", "FAILURE_ACTION": config.ReplaceNode})))

	waitFor(t, "the Node deleted", func() bool { return c.requests("delete", "") == 1 })
	assert.Zero(t, deletes(dyn), "a NodeClaim deleted for a node no NodeClaim owns")
	assert.Equal(t, "Deleted Node "+nodeName+" because checks failed: "+failingNote+"; no Karpenter NodeClaim owns it, "+
		"so nothing replaces the machine here: its kubelet registers the node again only when it restarts; "+
		"replace the machine from its node pool", c.waitEvent(t, wellknown.ReplacingNode).Note)
}
