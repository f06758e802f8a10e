package datapath

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/realnode"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// TestNetworkPolicyEngine runs the networkpolicy check, its canary installed as users install
// it, on real nodes over flannel, with kube-router's firewall as the NetworkPolicy engine on the
// nodes that run it, in one cluster whose state goes from no engine to an engine on each node:
//
//   - no engine: no kube-router runs anywhere; the joining node is Misconfigured, by name,
//     and stays held;
//   - engine started after: kube-router starts on that node; it is released once it enforces;
//   - healthy: a node that joins with kube-router running is released;
//   - slow engine: a node joins while other nodes of the configuration passed, with its
//     kube-router not started yet: held as its own fault (ChecksFailing or ChecksFailed, not
//     Misconfigured), the check named, and released once kube-router runs and enforces. (A
//     kube-router stopped after it programmed the node keeps enforcing: its chains stay, so
//     that is no fault to hold for.)
//
// Before each verdict the fault is shown real, or not, from a pod on the node: a probe pod that
// a copy of the canary selects connects to its node's kubelet while no engine runs there, and is
// refused once kube-router enforces.
func TestNetworkPolicyEngine(t *testing.T) {
	if _, err := realnode.KubeRouterBinary(); err != nil {
		t.Fatalf("%v", err)
	}
	c := startNodes(t, 4, 1, 1)
	ctx := t.Context()
	readyCoreDNS(t, c)
	_, err := c.Kubectl(ctx, "label", "node", c.Nodes[0].Name(), wellknown.VerifiedLabel+"=true")
	require.NoError(t, err)
	require.NoError(t, c.Install(ctx))
	_, err = c.Kubectl(ctx, "apply", "-f", c.RepoFile("manifests", "networkpolicy", "canary.yaml"))
	require.NoError(t, err, "the canary installed as docs/checks.md says")
	_, err = c.Kubectl(ctx, "-n", "kube-system", "patch", "configmap", "nodeready-config", "--type=merge",
		`-p={"data":{"CHECKS":"dns,tcp,apiserver,clock,endpoints,networkpolicy","CHECK_TIMEOUT":"5s","MAX_RETRIES":"2"}}`)
	require.NoError(t, err)
	probePolicy(t, c)

	t.Run("no engine: Misconfigured", func(t *testing.T) {
		n := c.Nodes[1]
		require.NoError(t, c.StartNodeAt(ctx, 1))
		require.NoError(t, kubeletFromProbe(t, c, n), "without an engine the kubelet's port opens from a pod the canary selects")
		cond := waitCondition(t, c, n.Name(), func(cond *corev1.NodeCondition) bool {
			return cond.Reason == string(wellknown.Misconfigured)
		})
		assert.Contains(t, cond.Message, "networkpolicy")
		assert.Contains(t, cond.Message, "NetworkPolicy not in force")
		node := getNodeNamed(t, c, n.Name())
		assert.True(t, hasStartupTaint(node), "a Misconfigured node is not released: %v", node.Spec.Taints)
		assert.NotContains(t, node.Labels, wellknown.VerifiedLabel)
	})

	t.Run("engine started after: released once it enforces", func(t *testing.T) {
		n := c.Nodes[1]
		require.NoError(t, n.StartKubeRouter(ctx, c.CP))
		waitKubeletBlocked(t, c, n)
		node := waitVerified(t, c, n.Name())
		assert.False(t, hasStartupTaint(node))
		assert.Equal(t, string(wellknown.Verified), framework.AgentCondition(node).Reason)
	})

	t.Run("healthy: released", func(t *testing.T) {
		n := c.Nodes[2]
		require.NoError(t, c.StartNodeAt(ctx, 2))
		require.NoError(t, n.StartKubeRouter(ctx, c.CP))
		node := waitVerified(t, c, n.Name())
		assert.False(t, hasStartupTaint(node))
		assert.Equal(t, string(wellknown.Verified), framework.AgentCondition(node).Reason)
		waitKubeletBlocked(t, c, n)
	})

	t.Run("slow engine: held as the node's fault, released once it enforces", func(t *testing.T) {
		n := c.Nodes[3]
		require.NoError(t, c.StartNodeAt(ctx, 3))
		require.NoError(t, kubeletFromProbe(t, c, n), "without kube-router on the node the kubelet's port opens from a pod the canary selects")
		cond := waitCondition(t, c, n.Name(), func(cond *corev1.NodeCondition) bool {
			return (cond.Reason == string(wellknown.ChecksFailing) || cond.Reason == string(wellknown.ChecksFailed)) &&
				strings.Contains(cond.Message, "networkpolicy")
		})
		assert.Contains(t, cond.Message, "NetworkPolicy not in force on this node")
		node := getNodeNamed(t, c, n.Name())
		assert.True(t, hasStartupTaint(node), "held: %v", node.Spec.Taints)
		assert.NotContains(t, node.Labels, wellknown.VerifiedLabel)
		assert.NotEmpty(t, nodeEvents(t, c, n.Name(), wellknown.CheckFailed), "a CheckFailed Event about the node")

		require.NoError(t, n.StartKubeRouter(ctx, c.CP))
		waitKubeletBlocked(t, c, n)
		node = waitVerified(t, c, n.Name())
		assert.False(t, hasStartupTaint(node))
		assert.Equal(t, string(wellknown.Verified), framework.AgentCondition(node).Reason)
	})
}

const probeNamespace, probeLabel = "default", "nodeready-e2e-probe"

// probePolicy installs, in the probe pods' namespace, the canary's own spec (read from the
// cluster, as the user installed it) selecting the probe pods instead of the agent's.
func probePolicy(t *testing.T, c *realnode.Cluster) {
	t.Helper()
	canary, err := c.CP.Client().NetworkingV1().NetworkPolicies("kube-system").Get(t.Context(), "nodeready-canary", metav1.GetOptions{})
	require.NoError(t, err)
	spec := canary.Spec.DeepCopy()
	spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{probeLabel: "true"}}
	_, err = c.CP.Client().NetworkingV1().NetworkPolicies(probeNamespace).Create(t.Context(), &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "nodeready-canary-probe"}, Spec: *spec,
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// kubeletFromProbe opens a new TCP connection to the node's kubelet from a probe pod on the
// node that the canary's copy selects, through the pod's network namespace.
func kubeletFromProbe(t *testing.T, c *realnode.Cluster, n *realnode.Node) error {
	t.Helper()
	name := "probe-" + n.Name()
	pod, err := c.CP.Client().CoreV1().Pods(probeNamespace).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		pod = runningPod(t, c, probeNamespace, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{probeLabel: "true"}},
			Spec: corev1.PodSpec{NodeName: n.Name(), Containers: []corev1.Container{{Name: "pause", Image: c.Images.Pause}},
				Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}},
		})
	}
	pids := n.PodPids(string(pod.UID))
	require.NotEmpty(t, pids, "the probe pod's processes on %s", n.Name())
	node := getNodeNamed(t, c, n.Name())
	kubelet := net.JoinHostPort(n.Address(), strconv.Itoa(int(node.Status.DaemonEndpoints.KubeletEndpoint.Port)))
	host, port, _ := net.SplitHostPort(kubelet)
	out, err := exec.CommandContext(t.Context(), "nsenter", "--net=/proc/"+strconv.Itoa(pids[0])+"/ns/net", "--",
		"timeout", "3", "bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/%s/%s", host, port)).CombinedOutput()
	if err != nil {
		err = fmt.Errorf("connect to %s: %w: %s", kubelet, err, out)
	}
	t.Logf("probe pod on %s → kubelet %s: %v", n.Name(), kubelet, err)
	return err
}

// waitKubeletBlocked waits until the probe pod on the node can no longer reach its kubelet:
// kube-router programmed the canary's copy there.
func waitKubeletBlocked(t *testing.T, c *realnode.Cluster, n *realnode.Node) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
		return kubeletFromProbe(t, c, n) != nil, nil
	})
	require.NoError(t, err, "kube-router on %s blocks the kubelet's port for a pod the canary selects", n.Name())
}

func getNodeNamed(t *testing.T, c *realnode.Cluster, name string) *corev1.Node {
	t.Helper()
	node, err := c.CP.Client().CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return node
}

func hasStartupTaint(n *corev1.Node) bool {
	for _, taint := range n.Spec.Taints {
		if taint.Key == wellknown.TaintKey {
			return true
		}
	}
	return false
}
