package verify

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/kubelet"
)

// assertVerifiedBy asserts that the node ran exactly pods agent pods, each started once
// (no restarts) and each ending with exit code 0 after the kubelet's SIGTERM, within the
// grace period. It returns the pods, oldest first.
func assertVerifiedBy(t *testing.T, f *framework.Fleet, node string, pods int) []kubelet.PodInfo {
	t.Helper()
	on := f.PodsOn(node)
	require.Len(t, on, pods, "agent pods on %s", node)
	for _, p := range on {
		assert.Zero(t, p.Restarts, "restarts of %s", p.Name)
		if assert.Len(t, p.Exits, 1, "exits of %s", p.Name) {
			e := p.Exits[0]
			assert.Equal(t, 0, e.Code, "exit code of %s", p.Name)
			assert.True(t, e.Signaled, "%s ended on its own, not on the kubelet's SIGTERM", p.Name)
			assert.False(t, e.Killed, "%s outlived its grace period", p.Name)
		}
	}
	assert.Contains(t, f.Kubelet().Images(node), framework.AgentImage, "image pulled on %s", node)
	// Oldest first: each pod ended before the next one started.
	slices.SortFunc(on, func(a, b kubelet.PodInfo) int {
		if len(a.Exits) == 0 || len(b.Exits) == 0 {
			return len(b.Exits) - len(a.Exits)
		}
		return a.Exits[0].At.Compare(b.Exits[0].At)
	})
	return on
}

// assertHistory asserts that the node went through exactly the states want, in order. It
// first waits until the node watch has seen the last of them: after an API server restart
// the watch may lag behind the node.
func assertHistory(t *testing.T, f *framework.Fleet, node string, want ...framework.NodeState) {
	t.Helper()
	require.NoError(t, f.History().WaitLatest(t.Context(), node, want[len(want)-1]))
	assert.Equal(t, want, f.History().States(node), "states of %s", node)
}

// waitDaemonSetDeleted waits for the DaemonSet controller's SuccessfulDelete event of every
// pod.
func waitDaemonSetDeleted(t *testing.T, fw *framework.Framework, pods []string) {
	t.Helper()
	missing := pods
	err := framework.Poll(t, func(ctx context.Context) (bool, error) {
		events, err := fw.Client().CoreV1().Events(framework.Namespace).List(ctx, metav1.ListOptions{
			FieldSelector: fields.Set{
				"involvedObject.kind": "DaemonSet",
				"involvedObject.name": framework.DaemonSetName,
				"reason":              "SuccessfulDelete",
			}.String(),
		})
		if err != nil {
			return false, nil
		}
		deleted := map[string]bool{}
		for _, e := range events.Items {
			deleted[e.Message] = true
		}
		missing = missing[:0:0]
		for _, p := range pods {
			if !deleted["Deleted pod: "+p] {
				missing = append(missing, p)
			}
		}
		return len(missing) == 0, nil
	})
	require.NoError(t, err, "no SuccessfulDelete event of the DaemonSet for %v", missing)
}

func podCondition(pod *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}

func taintsOf(n *corev1.Node) []string {
	var s []string
	for _, t := range n.Spec.Taints {
		s = append(s, t.ToString())
	}
	return s
}

// addNodes adds n nodes to the fleet and returns their names.
func addNodes(t *testing.T, f *framework.Fleet, n int, o framework.NodeOptions) []string {
	t.Helper()
	nodes, err := f.AddNodes(t.Context(), n, o)
	require.NoError(t, err)
	return nodes
}
