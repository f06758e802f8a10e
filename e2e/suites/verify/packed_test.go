package verify

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// testPackedNode: on a node whose allocatable CPU a workload uses up, the agent that the
// DaemonSet gives it cannot fit. The real scheduler preempts for a pod whose priority
// allows it (system-node-critical would evict the workload); the agent's PriorityClass
// never preempts, so the agent waits Pending and the workload keeps running.
func testPackedNode(t *testing.T, fw *framework.Framework) {
	ctx, client := t.Context(), fw.Client()
	f := fw.NewFleet("packed")
	node := f.Name() + "-0"
	// Verified already, so the DaemonSet gives it no agent until the label goes.
	require.NoError(t, f.AddNode(ctx, node, framework.NodeOptions{Untainted: true,
		Labels: map[string]string{wellknown.VerifiedLabel: "true"}}))

	// The workload takes every CPU the node has, as bin-packing leaves a node.
	n := fw.Node(node)
	cpu := n.Status.Allocatable[corev1.ResourceCPU]
	workload := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "packed-workload", Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{corev1.LabelHostname: node},
			Tolerations:  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "app", Image: "example.com/app:v1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: cpu}}}},
		},
	}
	workload, err := client.CoreV1().Pods("default").Create(ctx, workload, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = client.CoreV1().Pods("default").Delete(ctx, workload.Name, metav1.DeleteOptions{})
	})
	require.NoError(t, framework.Poll(t, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods("default").Get(ctx, workload.Name, metav1.GetOptions{})
		return err == nil && p.Spec.NodeName == node && p.Status.Phase == corev1.PodRunning, nil
	}), "the workload never ran on %s", node)

	// The label goes (a re-verification): the DaemonSet creates an agent pod for the node.
	_, err = fw.KubectlContext(ctx, "label", "node", node, wellknown.VerifiedLabel+"-")
	require.NoError(t, err)
	var agent corev1.Pod
	require.NoError(t, framework.Poll(t, func(ctx context.Context) (bool, error) {
		// Not bound yet: the DaemonSet controller names the node in the pod's affinity.
		pods, err := client.CoreV1().Pods(framework.Namespace).List(ctx, metav1.ListOptions{LabelSelector: framework.AgentSelector})
		if err != nil {
			return false, nil
		}
		i := slices.IndexFunc(pods.Items, func(p corev1.Pod) bool { return framework.PodNode(&p) == node })
		if i < 0 {
			return false, nil
		}
		agent = pods.Items[i]
		for _, cond := range agent.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
				return true, nil
			}
		}
		return false, nil
	}), "the agent pod on %s was never found unschedulable; last %+v", node, agent.Status)
	assert.Equal(t, "nodeready", agent.Spec.PriorityClassName)
	assert.Empty(t, agent.Status.NominatedNodeName, "the scheduler nominated the node for a preemption")

	// The scheduler's answer for the agent, and the workload as it was. The scheduler's
	// event broadcaster writes the Event after the pod's condition, so it is waited for.
	var events *corev1.EventList
	require.NoError(t, framework.Poll(t, func(ctx context.Context) (bool, error) {
		var err error
		events, err = client.CoreV1().Events(framework.Namespace).List(ctx, metav1.ListOptions{
			FieldSelector: fields.SelectorFromSet(fields.Set{"involvedObject.name": agent.Name, "reason": "FailedScheduling"}).String()})
		return err == nil && len(events.Items) > 0, nil
	}), "no FailedScheduling Event for %s", agent.Name)
	t.Logf("scheduler: %s", events.Items[0].Message)
	assert.Contains(t, events.Items[0].Message, "Insufficient cpu")
	p, err := client.CoreV1().Pods("default").Get(ctx, workload.Name, metav1.GetOptions{})
	require.NoError(t, err, "the workload is gone")
	assert.Nil(t, p.DeletionTimestamp, "the workload is being evicted")
	assert.Equal(t, workload.UID, p.UID)
	for _, cond := range p.Status.Conditions {
		assert.NotEqual(t, corev1.DisruptionTarget, cond.Type, "the workload was marked for preemption: %s", cond.Message)
	}

	// Room again: the agent runs and labels the node; nothing was ever evicted for it.
	require.NoError(t, client.CoreV1().Pods("default").Delete(ctx, workload.Name, metav1.DeleteOptions{}))
	require.NoError(t, framework.Poll(t, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Pods("default").Get(ctx, workload.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}))
	require.NoError(t, f.WaitReleased(ctx, node))
}
