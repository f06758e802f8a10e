package nodepatch

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodeready/nodeready/internal/kube/adapt"
	"github.com/nodeready/nodeready/internal/wellknown"
)

func TestReleaseWritesAnnotationsInTheSameWrite(t *testing.T) {
	p, client := newPatcher(t, newNode(map[string]string{"pool": "a"}, startup))
	done := map[string]string{"node-ready/verified-at": "2026-11-21T08:00:00Z", "node-ready/verification-duration": "1.5s"}
	_, err := p.Release(t.Context(), done)
	require.NoError(t, err)
	assert.Equal(t, []string{"get", "patch"}, verbs(client), "one read, one write")
	n := getNode(t, client)
	assert.Equal(t, "team-a", n.Annotations["example.com/owner"])
	assert.Equal(t, "1.5s", n.Annotations["node-ready/verification-duration"])

	// Already verified: the annotations are not rewritten.
	client.ClearActions()
	_, err = p.Release(t.Context(), map[string]string{"node-ready/verified-at": "later"})
	require.NoError(t, err)
	assert.Equal(t, []string{"get"}, verbs(client))
}

func TestSetConditionWritesOnlyChanges(t *testing.T) {
	node := newNode(nil, startup)
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}
	p, client := newPatcher(t, node)

	failing := wellknown.Condition{Status: corev1.ConditionFalse, Reason: wellknown.ChecksFailed, Message: "dns x: no such host"}
	wrote, err := p.SetCondition(t.Context(), failing)
	require.NoError(t, err)
	assert.True(t, wrote)
	wrote, err = p.SetCondition(t.Context(), failing)
	require.NoError(t, err)
	assert.False(t, wrote, "the same condition again is not written")

	var patches []k8stesting.PatchAction
	for _, a := range client.Actions() {
		if pa, ok := a.(k8stesting.PatchAction); ok {
			patches = append(patches, pa)
		}
	}
	require.Len(t, patches, 1)
	assert.Equal(t, "status", patches[0].GetSubresource())

	n := getNode(t, client)
	require.Len(t, n.Status.Conditions, 2, "the kubelet's condition stays")
	assert.Equal(t, "KubeletReady", condition(n, corev1.NodeReady).Reason)
	assert.Equal(t, string(wellknown.ChecksFailed), condition(n, wellknown.ConditionType).Reason)

	// Recovery: status changes, so the transition time moves.
	wrote, err = p.SetCondition(t.Context(), wellknown.Condition{Status: corev1.ConditionTrue, Reason: wellknown.Verified, Message: "ok"})
	require.NoError(t, err)
	assert.True(t, wrote)
	assert.Equal(t, corev1.ConditionTrue, condition(getNode(t, client), wellknown.ConditionType).Status)
}

func condition(n *corev1.Node, typ corev1.NodeConditionType) corev1.NodeCondition {
	for _, c := range n.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return corev1.NodeCondition{}
}

func TestTaintForReverification(t *testing.T) {
	tests := []struct {
		name   string
		node   *corev1.Node
		wrote  bool
		taints []corev1.Taint
	}{
		{"verified before, label removed: tainted", verifiedBefore(newNode(map[string]string{"pool": "a"})), true, []corev1.Taint{startup}},
		{"other taints are kept", verifiedBefore(newNode(map[string]string{"pool": "a"}, foreign)), true, []corev1.Taint{foreign, startup}},
		{"already tainted: no write", verifiedBefore(newNode(nil, startup)), false, []corev1.Taint{startup}},
		{"still verified: no write", verifiedBefore(newNode(map[string]string{"node-ready/verified": "true"})), false, nil},
		// A node that predates the install has neither label nor taint either.
		{"never verified by nodeready: no write", newNode(map[string]string{"pool": "a"}, foreign), false, []corev1.Taint{foreign}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, client := newPatcher(t, tt.node)
			wrote, err := p.Taint(t.Context())
			require.NoError(t, err)
			assert.Equal(t, tt.wrote, wrote)
			assert.Equal(t, tt.taints, getNode(t, client).Spec.Taints)
		})
	}
}

// verifiedBefore adds nodeready's completion record to n.
func verifiedBefore(n *corev1.Node) *corev1.Node {
	n.Annotations[spec.Record()] = "2026-11-21T08:00:00Z"
	return n
}

func TestSetConditionBoundsTheMessage(t *testing.T) {
	p, client := newPatcher(t, newNode(nil, startup))
	long := strings.Repeat("dns ünïcödé.example: no such host; ", 100) // 2-byte runes throughout
	c := wellknown.Condition{Status: corev1.ConditionFalse, Reason: wellknown.ChecksFailed, Message: long}
	wrote, err := p.SetCondition(t.Context(), c)
	require.NoError(t, err)
	assert.True(t, wrote)
	msg := condition(getNode(t, client), wellknown.ConditionType).Message
	assert.LessOrEqual(t, len(msg), wellknown.MaxMessage, "bytes")
	assert.True(t, utf8.ValidString(msg), "cut on a rune boundary")
	assert.True(t, strings.HasPrefix(long, strings.TrimSuffix(msg, "...")))
	assert.True(t, strings.HasSuffix(msg, "..."), "marked as cut")

	wrote, err = p.SetCondition(t.Context(), c)
	require.NoError(t, err)
	assert.False(t, wrote, "the same long condition again is not written")
}

// TestUntaint: the uninstall's write takes every startup taint off and nothing else, adds
// no label, and does nothing on a node without them.
func TestUntaint(t *testing.T) {
	extra := corev1.Taint{Key: "readiness.k8s.io/nodeready", Effect: corev1.TaintEffectNoSchedule}
	other := corev1.Taint{Key: "example.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}
	spec := Spec{Taints: []corev1.Taint{wellknown.StartupTaint(), extra}, LabelKey: wellknown.VerifiedLabel, LabelValue: "true"}
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", ResourceVersion: "1"},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{wellknown.StartupTaint(), other, extra}}})
	p := New(adapt.Clientset(client), "node-a", spec)

	wrote, err := p.Untaint(t.Context(), wellknown.UninstallFieldManager)
	require.NoError(t, err)
	assert.True(t, wrote)
	n := getNode(t, client)
	assert.Equal(t, []corev1.Taint{other}, n.Spec.Taints)
	assert.NotContains(t, n.Labels, wellknown.VerifiedLabel)

	wrote, err = p.Untaint(t.Context(), wellknown.UninstallFieldManager)
	require.NoError(t, err)
	assert.False(t, wrote, "nothing to take off: no write")
}
