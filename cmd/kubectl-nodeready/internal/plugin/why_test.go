package plugin

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodeready/nodeready/internal/golden"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// event returns an Event about node from controller, last seen d ago, count times.
func event(name, node, controller string, reason wellknown.Reason, eventType, note string, d time.Duration, count int32) *eventsv1.Event {
	e := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault},
		EventTime:           metav1.NewMicroTime(now.Add(-d - time.Minute)),
		ReportingController: controller,
		ReportingInstance:   "x",
		Reason:              string(reason),
		Type:                eventType,
		Regarding:           corev1.ObjectReference{Kind: "Node", Name: node},
		Note:                note,
	}
	if count > 1 {
		e.Series = &eventsv1.EventSeries{Count: count, LastObservedTime: metav1.NewMicroTime(now.Add(-d))}
	} else {
		e.EventTime = metav1.NewMicroTime(now.Add(-d))
	}
	return e
}

// TestWhy: the node's state, condition, agent pod and nodeready's latest Events about it
// (each failing check's note), and no one else's Events nor another node's.
func TestWhy(t *testing.T) {
	objs := append(fleet(),
		event("a1", "a-held", wellknown.AgentController, wellknown.CheckFailed, corev1.EventTypeWarning,
			`dns kubernetes.default.svc.cluster.local: resolve "kubernetes.default.svc.cluster.local": lookup kubernetes.default.svc.cluster.local on 10.96.0.10:53: no such host`, 20*time.Second, 14),
		event("a2", "a-held", wellknown.AgentController, wellknown.VerificationFailed, corev1.EventTypeWarning,
			"1 of the checks still failing after 5 rounds and 5m0.2s; node stays as it is; failure action: keep-tainted", 7*time.Minute, 1),
		event("a3", "a-held", wellknown.AgentController, wellknown.CheckFailed, corev1.EventTypeWarning,
			"tcp 10.96.0.1:443: dial tcp 10.96.0.1:443: i/o timeout", 9*time.Minute, 3),
		event("a4", "a-held", "kubelet", "NodeReady", corev1.EventTypeNormal, "Node a-held status is now: NodeReady", time.Minute, 1),
		event("a5", "f-verified", wellknown.AgentController, wellknown.Verified, corev1.EventTypeNormal, "All 4 checks passed", time.Minute, 1),
	)
	for _, tc := range []struct{ name, node string }{
		{"held", "a-held"},
		{"verified, no agent", "f-verified"},
		{"hand-released", "h-hand-released"},
		{"re-verifying without the taint", "e-reverifying-untainted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, newClient(objs...), "why", tc.node)
			require.NoError(t, r.err)
			assert.Empty(t, r.errOut)
			golden.Assert(t, "why-"+tc.node, r.out)
		})
	}
	t.Run("the latest only", func(t *testing.T) {
		r := run(t, newClient(objs...), "why", "a-held", "--events", "1")
		require.NoError(t, r.err)
		assert.Contains(t, r.out, "Events from nodeready, latest first (1 of 3):")
		assert.NotContains(t, r.out, "VerificationFailed")
	})
	t.Run("a node that does not exist", func(t *testing.T) {
		r := run(t, newClient(objs...), "why", "nope")
		require.EqualError(t, r.err, `get node nope: nodes "nope" not found`)
	})
	t.Run("needs the node", func(t *testing.T) {
		r := run(t, newClient([]runtime.Object{}...), "why")
		require.EqualError(t, r.err, "accepts 1 arg(s), received 0")
	})
}
