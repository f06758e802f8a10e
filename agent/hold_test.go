package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeready/nodeready/nodepatch"
)

// TestHoldTime: a node is held from its creation, a re-verified one from the agent's first
// start; the hold counts up while the node is held and stops at the release; a node the agent
// never saw tainted once registered has no hold time at all.
func TestHoldTime(t *testing.T) {
	created := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	started := created.Add(4 * time.Second)
	now := created.Add(10 * time.Second)
	for _, tt := range []struct {
		name  string
		reads []nodepatch.State
		want  string // the exposition of nodeready_hold_seconds; empty for none
	}{
		{"a new node is held from its creation",
			[]nodepatch.State{{Tainted: true, Registered: true, Created: created}}, "10"},
		{"the first read that shows it held decides",
			[]nodepatch.State{{Tainted: true, Registered: true, Created: created}, {Tainted: true, Registered: true, VerifiedBefore: true, Created: created}}, "10"},
		{"a re-verified node is held from the agent's first start",
			[]nodepatch.State{{Tainted: true, Registered: true, VerifiedBefore: true, Created: created.Add(-48 * time.Hour)}}, "6"},
		{"a node that predates the install is not held",
			[]nodepatch.State{{Registered: true, Created: created}}, ""},
		{"a Karpenter node is held once registered with its taint",
			[]nodepatch.State{{Registered: false, Created: created}, {Tainted: true, Registered: true, Created: created}}, "10"},
		{"a node whose creation is unknown is held from the agent's first start",
			[]nodepatch.State{{Tainted: true, Registered: true}}, "6"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHold(started)
			h.now = func() time.Time { return now }
			for _, s := range tt.reads {
				h.saw(s)
			}
			assert.NoError(t, testutil.CollectAndCompare(h, strings.NewReader(exposition(tt.want)), "nodeready_hold_seconds"))
		})
	}

	t.Run("the hold stops at the release", func(t *testing.T) {
		h := newHold(started)
		clock := now
		h.now = func() time.Time { return clock }
		h.saw(nodepatch.State{Tainted: true, Registered: true, Created: created})
		h.released(created.Add(7 * time.Second))
		clock = clock.Add(time.Hour)
		assert.NoError(t, testutil.CollectAndCompare(h, strings.NewReader(exposition("7")), "nodeready_hold_seconds"))
		h.released(clock)
		assert.NoError(t, testutil.CollectAndCompare(h, strings.NewReader(exposition("7")), "nodeready_hold_seconds"), "a second release changes nothing")
	})
}

// exposition is nodeready_hold_seconds with value v in the text format, or no sample when v
// is empty.
func exposition(v string) string {
	if v == "" {
		return ""
	}
	return "# HELP nodeready_hold_seconds " + holdHelp + "\n# TYPE nodeready_hold_seconds gauge\nnodeready_hold_seconds " + v + "\n"
}

// TestHoldTimeOfARealRun: an agent on a node created 30 seconds ago reports the node's hold
// from its creation, and the hold stays at the release's once released.
func TestHoldTimeOfARealRun(t *testing.T) {
	node := heldNode()
	node.CreationTimestamp = metav1.NewTime(time.Now().Add(-30 * time.Second).Truncate(time.Second))
	r := runNew(t, newCluster(node), passing)
	waitFor(t, "verified", func() bool { return isVerified(r.Agent) })
	first := testutil.ToFloat64(r.metrics.hold)
	assert.InDelta(t, 30, first, 2)
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, first, testutil.ToFloat64(r.metrics.hold), "the hold ended at the release")
}
