package agent

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodeready/nodeready/internal/config"
	"github.com/nodeready/nodeready/internal/wellknown"
)

const readinessTaint = "readiness.k8s.io/nodeready-unverified"

// externalAgent runs an agent built by New with TAINT_OWNER=external on a node held by
// readinessTaint (a NodeReadinessRule's) and the kubelet's not-ready taint, with one
// check that passes.
func externalAgent(t *testing.T, c *cluster) *running {
	t.Helper()
	return runNew(t, c, passing, map[string]string{"TAINT_OWNER": config.TaintOwnerExternal, "TAINT_KEY": readinessTaint})
}

func externalNode() *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", ResourceVersion: "1",
		Labels: map[string]string{"kubernetes.io/hostname": "node-a"}, Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0"}}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{
		{Key: readinessTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule},
		{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule},
	}}}
}

// TestExternalTaintOwner: with TAINT_OWNER=external the node is released by another
// controller (NRC) when node-ready/Verified turns True. The agent writes that condition
// before the label that ends it, and never writes a taint: the node keeps both taints.
func TestExternalTaintOwner(t *testing.T) {
	client := newCluster(externalNode())
	a := externalAgent(t, client)
	waitFor(t, "verified", func() bool { return isVerified(a.Agent) })

	condition, label := -1, -1
	for i, act := range client.Actions() {
		p, ok := act.(k8stesting.PatchAction)
		if !ok || act.GetResource().Resource != "nodes" {
			continue
		}
		switch patch := string(p.GetPatch()); {
		case act.GetSubresource() == "status" && strings.Contains(patch, `"status":"True"`) && condition < 0:
			condition = i
		case act.GetSubresource() == "":
			assert.NotContains(t, patch, "/spec/taints", "a write of the taints")
			if strings.Contains(patch, "node-ready~1verified") && label < 0 {
				label = i
			}
		}
	}
	require.GreaterOrEqual(t, condition, 0, "no True condition written")
	require.GreaterOrEqual(t, label, 0, "no label written")
	assert.Less(t, condition, label, "the label, which ends the agent, was written before the condition that releases the node")

	node := client.node(t)
	assert.Equal(t, externalNode().Spec.Taints, node.Spec.Taints, "the taints are the other controller's")
	assert.Equal(t, "true", node.Labels["node-ready/verified"])
	require.Len(t, node.Status.Conditions, 1)
	assert.Equal(t, corev1.ConditionTrue, node.Status.Conditions[0].Status)
	assert.Equal(t, string(wellknown.Verified), node.Status.Conditions[0].Reason)
}

// TestExternalTaintOwnerConditionRefused: when the condition cannot be written, the label
// does not land either (its write tests for the condition) (it would end the agent and leave the node held by a taint whose
// owner waits for the condition); the refusal is reported as a failed release.
func TestExternalTaintOwnerConditionRefused(t *testing.T) {
	client := newCluster(externalNode())
	client.PrependReactor("patch", "nodes", func(act k8stesting.Action) (bool, runtime.Object, error) {
		if act.GetSubresource() != "status" {
			return false, nil, nil
		}
		return true, nil, apierrors.NewForbidden(corev1.Resource("nodes/status"), "node-a", assert.AnError)
	})
	a := externalAgent(t, client)

	assert.Contains(t, client.waitEvent(t, wellknown.ReleaseFailed).Note, "forbidden")
	assert.Empty(t, client.eventsOf(t, wellknown.Verified))
	assert.False(t, isVerified(a.Agent))
	node := client.node(t)
	assert.NotContains(t, node.Labels, "node-ready/verified", "labelled without the condition")
}
