package kubelet

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
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

func TestSetConditionAndAllocatableSurviveHeartbeats(t *testing.T) {
	client := fake.NewClientset()
	k, err := New(client, Options{AgentBinary: os.Args[0], APIServerURL: "https://127.0.0.1:6443", CAFile: "ca.crt", LogDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(k.Stop)
	ctx := t.Context()
	require.NoError(t, k.AddNode(ctx, "node-a", NodeOptions{}))
	require.Error(t, k.SetCondition(ctx, "node-b", corev1.NodeReady, corev1.ConditionTrue), "unknown node")

	require.NoError(t, k.SetCondition(ctx, "node-a", "example.com/NetworkReady", corev1.ConditionFalse))
	require.NoError(t, k.SetCondition(ctx, "node-a", "example.com/NetworkReady", corev1.ConditionTrue))
	require.NoError(t, k.SetAllocatable(ctx, "node-a", "nvidia.com/gpu", resource.MustParse("2")))
	require.NoError(t, k.SetAllocatable(ctx, "node-a", "nvidia.com/gpu", resource.MustParse("1")))
	require.NoError(t, k.updateNodeStatus(ctx, "node-a"), "a heartbeat")

	n, err := client.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
	require.NoError(t, err)
	var network *corev1.NodeCondition
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == "example.com/NetworkReady" {
			network = &n.Status.Conditions[i]
		}
	}
	require.NotNil(t, network, "the heartbeat keeps the condition")
	assert.Equal(t, corev1.ConditionTrue, network.Status)
	assert.Len(t, n.Status.Conditions, 5, "the kubelet's four and the test's")
	gpu := n.Status.Allocatable["nvidia.com/gpu"]
	assert.Equal(t, "1", gpu.String())
	gpuCap := n.Status.Capacity["nvidia.com/gpu"]
	assert.Equal(t, "2", gpuCap.String(), "capacity is raised, never lowered")
	cpu := n.Status.Allocatable[corev1.ResourceCPU]
	assert.Equal(t, "4", cpu.String(), "the other resources stay")
}
