package kubelet

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRefreshConditions(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(10 * time.Second))
	agents := corev1.NodeCondition{Type: "node-ready/Verified", Status: corev1.ConditionTrue, Reason: "Verified", LastTransitionTime: t0}
	old := []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: t0, LastTransitionTime: t0},
		agents,
		// Set by the node lifecycle controller when heartbeats stopped for a while.
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown", LastHeartbeatTime: t0, LastTransitionTime: t0},
	}

	got := refreshConditions(old, t1)

	require.Len(t, got, 5)
	assert.Equal(t, agents, got[1], "another writer's condition stays as it is")
	ready := got[0]
	assert.Equal(t, corev1.NodeReady, ready.Type)
	assert.Equal(t, t1, ready.LastHeartbeatTime)
	assert.Equal(t, t0, ready.LastTransitionTime, "status unchanged, transition time kept")
	memory := got[2]
	assert.Equal(t, corev1.ConditionFalse, memory.Status)
	assert.Equal(t, t1, memory.LastTransitionTime, "status changed")
	assert.Equal(t, corev1.NodeDiskPressure, got[3].Type, "missing conditions are added")
	assert.Equal(t, corev1.NodePIDPressure, got[4].Type)
}
