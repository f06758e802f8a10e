package framework

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodCondition(t *testing.T) {
	ready := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Status: corev1.PodStatus{Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	notReady := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}}}
	none := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "c"}}

	assert.True(t, PodReady(&ready))
	assert.False(t, PodReady(&notReady))
	assert.False(t, PodReady(&none))
	assert.Equal(t, corev1.ConditionUnknown, PodCondition(&none, corev1.PodScheduled))
	assert.Equal(t, []string{"a Running ready=true", "b Pending ready=false", "c  ready=false"}, PodSummary([]corev1.Pod{ready, notReady, none}))
}

func TestTaints(t *testing.T) {
	n := &corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{
		{Key: "node-ready/unverified", Value: "true", Effect: corev1.TaintEffectNoSchedule},
		{Key: "example.com/dedicated", Effect: corev1.TaintEffectPreferNoSchedule},
	}}}
	assert.Equal(t, []string{"node-ready/unverified=true:NoSchedule", "example.com/dedicated:PreferNoSchedule"}, Taints(n))
	assert.Empty(t, Taints(&corev1.Node{}))
}
