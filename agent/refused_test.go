package agent

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// TestRefusedReadsBoundedPerRound: with RBAC gone before the agent first read its node
// (its ClusterRoleBinding deleted), every read and write of the node is refused. A round
// then costs the release's read and one try at the condition (a read, for the condition
// as the node shows it): no further read to learn whether the node is held, no second
// try at the condition in the same round.
func TestRefusedReadsBoundedPerRound(t *testing.T) {
	const more = 20
	c := newCluster(heldNode())
	c.unreachable(apierrors.NewForbidden(corev1.Resource("nodes"), nodeName, assert.AnError))
	r := runNew(t, c, passing, map[string]string{"MAX_RETRIES": "2"})

	waitFor(t, "failure recorded", func() bool { return failures(r.Agent) == 1 })
	r0, from := rounds(r.Agent), len(c.Actions())
	waitFor(t, "rounds", func() bool { return rounds(r.Agent) >= r0+more })
	counts := map[string]int{}
	for _, act := range c.Actions()[from:] {
		counts[act.GetVerb()+" "+act.GetResource().Resource+" "+act.GetSubresource()]++
	}
	n := int(rounds(r.Agent) - r0)
	// The informer's own list and watch, refused, are retried at its backoff (800 ms and up).
	assert.LessOrEqual(t, counts["get nodes "], 2*(n+1)+4, "reads of the node in %d rounds: %v", n, counts)
	assert.Zero(t, counts["patch nodes "]+counts["patch nodes status"], "writes after refused reads: %v", counts)
	assert.False(t, isVerified(r.Agent))
}
