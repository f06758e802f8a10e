package admission

import (
	"context"
	"maps"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeready/nodeready/e2e/framework"
)

// The DaemonSet controller creates pods within a second or two of a node's creation.
const (
	pollInterval = 100 * time.Millisecond
	pollTimeout  = time.Minute
)

// TestServedNodes holds that the DaemonSet and the creation policy agree on the nodes
// nodeready serves, Linux nodes that run pods from images: a node the DaemonSet controller
// gives no agent pod must not get the startup taint either, as nothing would remove it.
func TestServedNodes(t *testing.T) {
	cp := framework.New(t, framework.Options{ControlPlaneOnly: true}).ControlPlane()
	admin := cp.Client()
	requireMutatingAdmissionPolicyV1(t, admin)
	kubectl(t, cp, "apply", "-f", filepath.Join("..", "..", "..", "manifests"))
	install(t, cp, "startup-taint.yaml", map[string]string{"kubernetes.io/os": "linux"})

	type node struct {
		name   string
		labels map[string]string
		taints []corev1.Taint
	}
	unserved := []node{
		{name: "windows", labels: map[string]string{"kubernetes.io/os": "windows"}},
		{name: "no-os-label"},
		// virtual-kubelet (AKS virtual nodes on ACI, Alibaba ECI, Liqo, interLink, ...).
		{name: "virtual-kubelet",
			labels: map[string]string{"kubernetes.io/os": "linux", "type": "virtual-kubelet", "kubernetes.io/role": "agent"},
			taints: []corev1.Taint{{Key: "virtual-kubelet.io/provider", Value: "azure", Effect: corev1.TaintEffectNoSchedule}}},
		{name: "fargate",
			labels: map[string]string{"kubernetes.io/os": "linux", "eks.amazonaws.com/compute-type": "fargate"},
			taints: []corev1.Taint{{Key: "eks.amazonaws.com/compute-type", Value: "fargate", Effect: corev1.TaintEffectNoSchedule}}},
	}
	served := []node{
		{name: "linux", labels: map[string]string{"kubernetes.io/os": "linux"}},
		// EKS Auto Mode and hybrid nodes are machines with a kubelet.
		{name: "eks-auto", labels: map[string]string{"kubernetes.io/os": "linux", "eks.amazonaws.com/compute-type": "auto"}},
	}
	// The unserved nodes first: the DaemonSet sync that creates the last served node's pod
	// has seen them all.
	for _, n := range append(slices.Clone(unserved), served...) {
		createNode(t, admin, n.name, maps.Clone(n.labels), n.taints)
	}

	for _, n := range unserved {
		assert.Equal(t, 0, countStartupTaints(ownTaints(framework.GetNode(t, admin, n.name))), "node %s got the startup taint", n.name)
		assert.Equal(t, n.taints, ownTaints(framework.GetNode(t, admin, n.name)), "node %s keeps its own taints", n.name)
	}
	for _, n := range served {
		assert.Equal(t, []corev1.Taint{startupTaint}, ownTaints(framework.GetNode(t, admin, n.name)), "node %s", n.name)
	}

	// The DaemonSet controller: an agent pod for every served node, none for the others.
	var byNode map[string]int
	err := wait.PollUntilContextTimeout(t.Context(), pollInterval, pollTimeout, true, func(ctx context.Context) (bool, error) {
		ds, err := admin.AppsV1().DaemonSets("kube-system").Get(ctx, "nodeready", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pods, err := admin.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=nodeready"})
		if err != nil {
			return false, err
		}
		byNode = map[string]int{}
		for _, p := range pods.Items {
			byNode[framework.PodNode(&p)]++
		}
		for _, n := range served {
			if byNode[n.name] == 0 {
				return false, nil
			}
		}
		return ds.Status.ObservedGeneration == ds.Generation && ds.Status.DesiredNumberScheduled == int32(len(served)), nil
	})
	require.NoError(t, err, "agent pods by node: %v", byNode)
	for _, n := range unserved {
		assert.Zero(t, byNode[n.name], "node %s got an agent pod", n.name)
	}
	for _, n := range served {
		assert.Equal(t, 1, byNode[n.name], "agent pods on node %s", n.name)
	}
}
