package agent

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/nodeready/nodeready/internal/config"
	"github.com/nodeready/nodeready/internal/wellknown"
	"github.com/nodeready/nodeready/nodepatch"
)

// TestDecide is the failure policy as a table of transitions: a state and a round's
// result, and what follows. Only the node's own fault, on a node nodeready holds, after
// the retries, brings on the failure action.
func TestDecide(t *testing.T) {
	held := state{observed: true, held: true}
	failedHeld := state{observed: true, held: true, failed: true}
	node := result{verdict: problems, failing: []string{"dns x: no such host"}}
	cluster := result{verdict: problems, misconfigured: []string{"dra gpu>=1: the API server serves no resource.k8s.io"}}
	both := result{verdict: problems, failing: node.failing, misconfigured: cluster.misconfigured}
	keep := policy{action: config.KeepTainted, maxRetries: 3, initialTimeout: time.Hour, failOpenAfter: time.Minute}
	replace, failOpen := keep, keep
	replace.action, failOpen.action = config.ReplaceNode, config.FailOpen
	early, late := time.Second, 2*time.Hour

	for _, tt := range []struct {
		name    string
		s       state
		r       result
		round   int
		elapsed time.Duration
		p       policy
		want    decision
	}{
		{"aborted: nothing", held, result{verdict: aborted}, 9, late, replace, decision{next: held}},
		{"waiting for Karpenter: nothing", held, result{verdict: waiting}, 9, late, replace, decision{next: held}},
		{"waiting after a failure: capped rounds", failedHeld, result{verdict: waiting}, 9, late, replace, decision{next: failedHeld, capped: true}},
		{"a problem before the retries run out", held, node, 2, early, replace, decision{next: held}},
		{"the retries run out: recorded", held, node, 3, early, keep, decision{next: failedHeld, record: true, capped: true}},
		{"the initial timeout runs out: recorded", held, node, 1, late, keep, decision{next: failedHeld, record: true, capped: true}},
		{"recorded once, then followed", failedHeld, node, 4, early, keep, decision{next: failedHeld, follow: true, capped: true}},
		{"replace-node when recorded", held, node, 3, early, replace, decision{next: failedHeld, record: true, capped: true, act: config.ReplaceNode}},
		{"replace-node again while not replaced", failedHeld, node, 4, early, replace, decision{next: failedHeld, follow: true, capped: true, act: config.ReplaceNode}},
		{"replace-node once", state{observed: true, held: true, failed: true, replaced: true}, node, 4, early, replace,
			decision{next: state{observed: true, held: true, failed: true, replaced: true}, follow: true, capped: true}},
		{"being deleted: the condition stays Replacing", state{observed: true, held: true, failed: true, replaced: true, deleting: true}, node, 5, early, replace,
			decision{next: state{observed: true, held: true, failed: true, replaced: true, deleting: true}, capped: true}},
		{"fail-open before its time", held, node, 3, early, failOpen, decision{next: failedHeld, record: true, capped: true}},
		{"fail-open after its time", failedHeld, node, 4, late, failOpen, decision{next: failedHeld, follow: true, capped: true, act: config.FailOpen}},
		{"the cluster's fault never acts", held, cluster, 3, late, replace, decision{next: failedHeld, record: true, capped: true}},
		{"the cluster's fault never fails open", failedHeld, cluster, 4, late, failOpen, decision{next: failedHeld, follow: true, capped: true}},
		{"the cluster's fault beside the node's does not stop the node's from acting", failedHeld, both, 4, late, replace,
			decision{next: failedHeld, follow: true, capped: true, act: config.ReplaceNode}},
		{"a fault whose owner the node cannot tell never acts", held, result{verdict: problems, unattributed: []string{"podnetwork: one peer"}}, 3, late, replace,
			decision{next: failedHeld, record: true, capped: true}},
		{"not held: never acts", state{observed: true}, node, 3, late, replace, decision{next: state{observed: true, failed: true}, record: true, capped: true}},
		{"not known yet: never acts", state{}, node, 3, late, failOpen, decision{next: state{failed: true}, record: true, capped: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, decide(tt.s, tt.r, tt.round, tt.elapsed, tt.p))
		})
	}
}

// TestStateAfterReplace: a deletion makes the node one being deleted; the refusals that
// are for good end the replacement, and a node whose taint is gone is not held any more;
// any other error is tried again.
func TestStateAfterReplace(t *testing.T) {
	held := state{observed: true, held: true, failed: true}
	for _, tt := range []struct {
		err  error
		want state
	}{
		{nil, state{observed: true, held: true, failed: true, replaced: true, deleting: true}},
		{fmt.Errorf("node a: %w", nodepatch.ErrControlPlane), state{observed: true, held: true, failed: true, replaced: true}},
		{fmt.Errorf("node a: %w", nodepatch.ErrVerifiedBefore), state{observed: true, held: true, failed: true, replaced: true}},
		{fmt.Errorf("node a: %w", nodepatch.ErrNotHeld), state{observed: true, failed: true, replaced: true}},
		{fmt.Errorf("delete nodeclaim: %w", nodepatch.ErrForbidden), held},
	} {
		t.Run(fmt.Sprint(tt.err), func(t *testing.T) {
			assert.Equal(t, tt.want, held.replacedWith(tt.err))
		})
	}
}

// TestStateObserved: a node is held when it carried the startup taint once registered; a
// Karpenter node that is not registered yet tells nothing.
func TestStateObserved(t *testing.T) {
	assert.Equal(t, state{}, state{}.observedAs(nodepatch.State{Tainted: true}))
	assert.Equal(t, state{observed: true, held: true}, state{}.observedAs(nodepatch.State{Tainted: true, Registered: true}))
	assert.Equal(t, state{observed: true}, state{}.observedAs(nodepatch.State{Registered: true}))
	assert.Equal(t, state{observed: true, held: true}, state{held: true}.observedAs(nodepatch.State{Registered: true}), "put back for a re-verification")
}

// TestProblemCondition: ChecksFailed while the node is at fault, Misconfigured when only the
// cluster or the configuration is, Replacing once the node is being deleted.
func TestProblemCondition(t *testing.T) {
	node := result{failing: []string{"dns x: timeout"}}
	cluster := result{misconfigured: []string{"release: forbidden"}}
	assert.Equal(t, wellknown.ChecksFailed, state{}.problemCondition(node, "").Reason)
	assert.Equal(t, "dns x: timeout; not replaced: refused", state{}.problemCondition(node, "refused").Message)
	assert.Equal(t, wellknown.Misconfigured, state{}.problemCondition(cluster, "").Reason)
	assert.Equal(t, wellknown.ChecksFailed, state{}.problemCondition(result{failing: node.failing, misconfigured: cluster.misconfigured}, "").Reason)
	replacing := state{deleting: true}.problemCondition(node, "refused")
	assert.Equal(t, wellknown.Replacing, replacing.Reason)
	assert.Equal(t, "dns x: timeout", replacing.Message)
}
