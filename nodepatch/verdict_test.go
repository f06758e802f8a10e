package nodepatch

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodeready/nodeready/internal/wellknown"
)

var (
	verified = wellknown.Condition{Status: corev1.ConditionTrue, Reason: wellknown.Verified, Message: "All 4 checks passed"}
	ready    = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}
	refusal  = corev1.NodeCondition{Type: wellknown.ConditionType, Status: corev1.ConditionFalse, Reason: string(wellknown.Misconfigured),
		Message: "release: refused", LastTransitionTime: metav1.NewTime(time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC))}
)

// TestReleaseWithWritesItsConditionFirst: the release writes its condition to the status,
// wherever the node has it or appends it, and the node's write, which tests for it, lands
// after it; the kubelet's conditions, the other taints, labels and annotations stay.
func TestReleaseWithWritesItsConditionFirst(t *testing.T) {
	for name, tc := range map[string]struct {
		have []corev1.NodeCondition
		at   int
	}{
		"no conditions":           {nil, 0},
		"the kubelet's":           {[]corev1.NodeCondition{ready}, 1},
		"its own, saying no":      {[]corev1.NodeCondition{refusal, ready}, 0},
		"its own after another's": {[]corev1.NodeCondition{ready, refusal}, 1},
	} {
		t.Run(name, func(t *testing.T) {
			node := newNode(map[string]string{"kubernetes.io/hostname": nodeName}, startup, foreign)
			node.Status.Conditions = tc.have
			p, client := newPatcher(t, node)

			outcome, err := p.ReleaseWith(t.Context(), verified, map[string]string{"node-ready/verified-at": "now"})
			require.NoError(t, err)
			assert.Equal(t, Patched, outcome)
			n := getNode(t, client)
			assert.Equal(t, "true", n.Labels["node-ready/verified"])
			assert.Equal(t, nodeName, n.Labels["kubernetes.io/hostname"])
			assert.Equal(t, []corev1.Taint{foreign}, n.Spec.Taints)
			assert.Equal(t, "team-a", n.Annotations["example.com/owner"])
			want := len(tc.have)
			if tc.at == len(tc.have) {
				want++ // appended
			}
			require.Len(t, n.Status.Conditions, want)
			got := n.Status.Conditions[tc.at]
			assert.Equal(t, wellknown.ConditionType, got.Type)
			assert.Equal(t, corev1.ConditionTrue, got.Status)
			assert.Equal(t, string(wellknown.Verified), got.Reason)
			assert.Equal(t, verified.Message, got.Message)
			assert.NotEqual(t, refusal.LastTransitionTime.Time, got.LastTransitionTime.Time, "a transition keeps the old time")
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady {
					assert.Equal(t, ready, c, "the kubelet's condition changed")
				}
			}
			var order []string
			for _, a := range client.Actions() {
				if a.GetVerb() == "patch" {
					order = append(order, a.GetSubresource())
				}
			}
			// The condition's write first, the node's 10 ms later: on a machine too busy to start
			// the condition's in time, the node's comes first, is refused by its test, and is sent
			// again after the condition's answer.
			require.NotEmpty(t, order)
			assert.Equal(t, "", order[len(order)-1], "the node's write last")
			assert.Contains(t, order[:len(order)-1], "status", "no condition written before the node's write that landed")
		})
	}
}

// TestReleaseFromAStaleViewKeepsOneCondition: the release plans its condition's write from
// the node as its watch last showed it. When that view lags behind a condition the agent
// wrote (a write whose answer was lost), appending would give the node two conditions of
// nodeready's type, which the own-node policy refuses (403) and the agent would take for a
// misconfiguration. The append is fenced by the resourceVersion seen: refused (422) on a
// stale view, then planned again from a fresh read, it replaces the one condition.
func TestReleaseFromAStaleViewKeepsOneCondition(t *testing.T) {
	verifying := corev1.NodeCondition{Type: wellknown.ConditionType, Status: corev1.ConditionFalse, Reason: string(wellknown.Verifying),
		Message: "not released yet"}
	stored := newNode(nil, startup)
	stored.ResourceVersion = "2"
	stored.Status.Conditions = []corev1.NodeCondition{ready, verifying}
	p, client := newPatcher(t, stored)
	stale := newNode(nil, startup) // as a lagging watch shows it: before the agent's own write
	stale.Status.Conditions = []corev1.NodeCondition{ready}
	var served atomic.Bool
	client.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if served.CompareAndSwap(false, true) {
			return true, stale.DeepCopy(), nil
		}
		return false, nil, nil
	})

	_, err := p.ReleaseWith(t.Context(), verified, nil)
	require.NoError(t, err)
	n := getNode(t, client)
	var ours []corev1.NodeCondition
	for _, c := range n.Status.Conditions {
		if c.Type == wellknown.ConditionType {
			ours = append(ours, c)
		}
	}
	require.Len(t, ours, 1, "one condition of nodeready's type: %+v", n.Status.Conditions)
	assert.Equal(t, string(wellknown.Verified), ours[0].Reason)
	assert.Equal(t, "true", n.Labels["node-ready/verified"])
}

// TestReleaseWithFailedOpen: a fail-open release labels the node failed-open, its condition
// FailedOpen.
func TestReleaseWithFailedOpen(t *testing.T) {
	p, client := newPatcher(t, newNode(nil, startup))
	_, err := p.ReleaseWith(t.Context(), wellknown.Condition{Status: corev1.ConditionFalse, Reason: wellknown.FailedOpen, Message: "dns failing"}, nil)
	require.NoError(t, err)
	n := getNode(t, client)
	assert.Equal(t, wellknown.FailedOpenValue, n.Labels["node-ready/verified"])
	assert.Equal(t, string(wellknown.FailedOpen), n.Status.Conditions[0].Reason)
}

// TestReleaseWithRefusedIsWithdrawn: the node's write is refused after the condition landed;
// the release returns the refusal, and Withdraw puts the condition that says why in place of
// True. On a node that is released, Withdraw writes nothing and says so.
func TestReleaseWithRefusedIsWithdrawn(t *testing.T) {
	node := newNode(nil, startup)
	node.Status.Conditions = []corev1.NodeCondition{ready}
	p, client := newPatcher(t, node)
	client.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "" {
			return true, nil, apierrors.NewForbidden(corev1.Resource("nodes"), nodeName, assert.AnError)
		}
		return false, nil, nil
	})
	_, err := p.ReleaseWith(t.Context(), verified, nil)
	require.ErrorIs(t, err, ErrForbidden)
	assert.Equal(t, corev1.ConditionTrue, getNode(t, client).Status.Conditions[1].Status, "the condition's write landed")

	released, err := p.Withdraw(t.Context(), wellknown.Condition{Status: corev1.ConditionFalse, Reason: wellknown.Misconfigured, Message: "release: forbidden"})
	require.NoError(t, err)
	assert.False(t, released)
	n := getNode(t, client)
	assert.Equal(t, []corev1.Taint{startup}, n.Spec.Taints)
	assert.Equal(t, string(wellknown.Misconfigured), n.Status.Conditions[1].Reason)
	assert.Equal(t, ready, n.Status.Conditions[0])

	n.Labels = map[string]string{"node-ready/verified": "true"}
	n.Spec.Taints = nil
	putNode(t, client, n)
	writes := len(client.Actions())
	released, err = p.Withdraw(t.Context(), wellknown.Condition{Status: corev1.ConditionFalse, Reason: wellknown.Verifying, Message: "not released yet"})
	require.NoError(t, err)
	assert.True(t, released, "a released node")
	for _, a := range client.Actions()[writes:] {
		assert.NotEqual(t, "patch", a.GetVerb(), "a write to a released node")
	}
}

// TestConditionNeverOverALateRelease: a release's write got no answer and landed later. Every
// condition saying the node is not released is refused from then on (ErrReleased), the second
// as the first: finding the node released once does not lift the fence, or the taking back
// still pending would be written over the label at the next try (a 5000-node burst left a node
// labelled with Verifying so).
func TestConditionNeverOverALateRelease(t *testing.T) {
	node := newNode(nil, startup)
	node.Status.Conditions = []corev1.NodeCondition{ready}
	p, client := newPatcher(t, node)
	var late k8stesting.Action
	client.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "" && late == nil {
			late = a.DeepCopy()
			return true, nil, context.DeadlineExceeded
		}
		return false, nil, nil
	})
	_, err := p.ReleaseWith(t.Context(), verified, nil)
	require.ErrorIs(t, err, ErrUnknownOutcome)
	// The write lands late: the node is released, with the release's condition.
	_, err = client.Invokes(late, nil)
	require.NoError(t, err)
	require.Contains(t, getNode(t, client).Labels, "node-ready/verified")

	takeBack := wellknown.Condition{Status: corev1.ConditionFalse, Reason: wellknown.Verifying, Message: "not released yet"}
	for try := range 2 {
		_, err := p.SetCondition(t.Context(), takeBack)
		require.ErrorIs(t, err, ErrReleased, "try %d", try)
		assert.Equal(t, corev1.ConditionTrue, getNode(t, client).Status.Conditions[1].Status, "try %d: the release's condition stays", try)
	}
}
