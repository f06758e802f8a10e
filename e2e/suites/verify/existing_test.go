package verify

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// TestInstallOnARunningCluster runs the cases on one control plane with nodeready installed
// from manifests/ and the optional replace-node permission applied too, so that a wrong
// deletion would really happen.
func TestInstallOnARunningCluster(t *testing.T) {
	fw := framework.New(t, framework.Options{})
	out, err := fw.Kubectl("apply", "-f", filepath.Join(fw.RepoRoot(), "manifests", "replace-node"))
	require.NoError(t, err, out)

	fw.Run("every node tainted and no cluster DNS: the first nodes are released and DNS starts", testBootstrapDNS)
	fw.Run("nodes that predate the install are labelled, never tainted or replaced", testExistingNodes)
	fw.Run("a refused release is a misconfiguration, never a reason to replace", testRefusedRelease)
	fw.Run("a packed node: the agent waits, no workload is preempted for it", testPackedNode)
}

// failing are the settings under which a failing held node would be replaced at once, and
// a released one tainted again.
var failing = map[string]string{"FAILURE_ACTION": "replace-node", "REVERIFY_TAINT": "true", "MAX_RETRIES": "1"}

// testExistingNodes: nodes without the startup taint, as every node of a running cluster is
// at install, one of them a control-plane node, with the most destructive settings. A node
// whose checks fail is reported, and neither tainted nor deleted; each is labelled once its
// checks pass.
func testExistingNodes(t *testing.T, fw *framework.Framework) {
	ctx := t.Context()
	f := fw.NewFleet("existing")
	healthy, broken, controlPlane := f.Name()+"-0", f.Name()+"-1", f.Name()+"-2"
	require.NoError(t, f.AddNode(ctx, healthy, framework.NodeOptions{Untainted: true, Env: failing}))
	require.NoError(t, f.AddNode(ctx, broken, framework.NodeOptions{Untainted: true, BrokenDNS: true, Env: failing}))
	require.NoError(t, f.AddNode(ctx, controlPlane, framework.NodeOptions{Untainted: true, BrokenDNS: true, Env: failing,
		Labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}}))

	require.NoError(t, f.WaitReleased(ctx, healthy))
	for _, node := range []string{broken, controlPlane} {
		cond := fw.WaitCondition(node, string(wellknown.ChecksFailed))
		assert.Contains(t, cond.Message, "dns "+framework.DNSName)
		e := fw.WaitEvent(node, "VerificationFailed")
		assert.Contains(t, e.Note, "failure action: none, the node is not held by nodeready")
	}
	// The failure action would follow the recorded failure at once, in the same round;
	// a few more rounds (RETRY_BACKOFF_MAX is 1s) leave it every chance.
	waitRounds(t, f, broken, 3)
	for _, node := range []string{broken, controlPlane} {
		n := fw.Node(node)
		assert.False(t, framework.IsTainted(n), "node %s was never held: never tainted", node)
		assert.NotContains(t, n.Labels, wellknown.VerifiedLabel)
	}

	f.DNS(broken).SetBroken(false)
	f.DNS(controlPlane).SetBroken(false)
	require.NoError(t, f.WaitReleased(ctx, broken, controlPlane))
	for _, node := range []string{healthy, broken, controlPlane} {
		for _, s := range f.History().States(node) {
			assert.False(t, s.Tainted, "node %s was tainted at some point: %v", node, f.History().States(node))
		}
	}
	require.NoError(t, f.WaitAgentsGone(ctx, healthy, broken, controlPlane))

	// Re-verification of a node nodeready verified: REVERIFY_TAINT applies now, since the
	// node carries nodeready's completion record. The agent then holds the node, so a
	// failure action would apply: keep-tainted here, the node heals.
	f.SetEnv(broken, map[string]string{"REVERIFY_TAINT": "true"})
	f.DNS(broken).SetBroken(true)
	_, err := fw.KubectlContext(ctx, "label", "node", broken, wellknown.VerifiedLabel+"-")
	require.NoError(t, err)
	require.NoError(t, framework.Poll(t, func(ctx context.Context) (bool, error) {
		n, err := fw.Client().CoreV1().Nodes().Get(ctx, broken, metav1.GetOptions{})
		return err == nil && framework.IsTainted(n), nil
	}), "a node nodeready verified before is tainted again for its re-verification")
	f.DNS(broken).SetBroken(false)
	require.NoError(t, f.WaitReleased(ctx, broken))
}

// testRefusedRelease: VERIFIED_LABEL changed in the ConfigMap but not in the admission
// policy, on a node nodeready holds, with replace-node: the checks pass, the policy
// refuses the release. That is reported as a misconfiguration, and the node is not deleted.
func testRefusedRelease(t *testing.T, fw *framework.Framework) {
	ctx := t.Context()
	f := fw.NewFleet("refused")
	node := f.Name() + "-0"
	env := map[string]string{"VERIFIED_LABEL": "example.com/verified"}
	for k, v := range failing {
		env[k] = v
	}
	require.NoError(t, f.AddNode(ctx, node, framework.NodeOptions{Env: env}))

	cond := fw.WaitCondition(node, string(wellknown.Misconfigured))
	assert.Equal(t, corev1.ConditionFalse, cond.Status)
	assert.Contains(t, cond.Message, "release: ")
	refused := fw.WaitEvent(node, "ReleaseFailed")
	assert.Equal(t, corev1.EventTypeWarning, refused.Type)
	assert.Contains(t, refused.Note, "a misconfiguration, not a failed check")
	assert.Contains(t, refused.Note, "may change only the labels node-ready/verified and node-ready/verified-config", "the policy's own message")
	failed := fw.WaitEvent(node, "VerificationFailed")
	assert.Contains(t, failed.Note, "failure action: none while the installation is misconfigured")

	waitRounds(t, f, node, 3)
	requireNodeKept(t, fw, node)
	n := fw.Node(node)
	assert.True(t, framework.IsTainted(n), "still held")
	fw.RequireNoEvent(node, "ReplacingNode")
	fw.RequireNoEvent(node, "CheckFailed")
}

// testBootstrapDNS: a new cluster (or a pool swap) where every node carries the startup
// taint and cluster DNS cannot run, because its pods do not tolerate the taint. The dns
// check fails on every node; the agents see that the cluster DNS Service has no ready
// endpoint anywhere, release their nodes with the dns check reported as not checked, and
// the DNS Deployment is scheduled onto a released node. From then on, DNS is checked again:
// a new node whose DNS fails is held.
//
// kube-dns here has no selector and the test publishes its endpoint: the simulated pods
// have a loopback IP, which EndpointSlice validation rejects (see framework.BackendService),
// so the test mirrors the DNS pod's readiness into the slice at a documentation-range
// address, as the EndpointSlice controller would with the pod's IP.
func testBootstrapDNS(t *testing.T, fw *framework.Framework) {
	ctx := t.Context()
	f := fw.NewFleet("bootstrap")
	slice := createKubeDNS(t, fw)
	createDNSDeployment(t, fw, f.Name())

	env := map[string]string{"MAX_RETRIES": "2"}
	first, err := f.AddNodes(ctx, 2, framework.NodeOptions{BrokenDNS: true, Env: env})
	require.NoError(t, err)

	// Every node tainted, DNS down everywhere: released anyway, and saying why.
	require.NoError(t, f.WaitReleased(ctx, first...))
	for _, node := range first {
		cond := fw.WaitCondition(node, string(wellknown.Verified))
		assert.Equal(t, corev1.ConditionTrue, cond.Status)
		assert.Contains(t, cond.Message, "cannot be checked: no cluster DNS is running (kube-system/kube-dns has no ready endpoint)")
		e := fw.WaitEvent(node, "DNSNotChecked")
		assert.Equal(t, corev1.EventTypeWarning, e.Type)
		fw.RequireNoEvent(node, "CheckFailed")
	}

	// The DNS pod lands on a released node; its endpoint is published.
	pod := waitDNSPodReady(t, fw)
	assert.Contains(t, first, pod.Spec.NodeName)
	slice.Endpoints = []discoveryv1.Endpoint{{
		Addresses:  []string{"192.0.2.53"}, // TEST-NET-1, never routed; nothing dials it
		Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		NodeName:   ptr.To(pod.Spec.NodeName),
	}}
	_, err = fw.Client().DiscoveryV1().EndpointSlices(slice.Namespace).Update(ctx, slice, metav1.UpdateOptions{})
	require.NoError(t, err)

	// Now cluster DNS runs: a node whose DNS fails is held, and released once it works.
	later, err := f.AddNodes(ctx, 1, framework.NodeOptions{BrokenDNS: true, Env: env})
	require.NoError(t, err)
	cond := fw.WaitCondition(later[0], string(wellknown.ChecksFailed))
	assert.Contains(t, cond.Message, "dns "+framework.DNSName)
	assert.NotContains(t, cond.Message, "cannot be checked")
	assert.True(t, framework.IsTainted(fw.Node(later[0])))
	f.DNS(later[0]).SetBroken(false)
	require.NoError(t, f.WaitReleased(ctx, later[0]))
	require.NoError(t, f.WaitAgentsGone(ctx, append(first, later...)...))
}

// createKubeDNS creates kube-system/kube-dns, without a selector, and its EndpointSlice
// with no endpoint, as in a cluster whose DNS pods are all Pending.
func createKubeDNS(t *testing.T, fw *framework.Framework) *discoveryv1.EndpointSlice {
	t.Helper()
	ctx := t.Context()
	_, err := fw.Client().CoreV1().Services("kube-system").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Labels: map[string]string{"k8s-app": "kube-dns"}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
			{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP},
		}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	slice, err := fw.Client().DiscoveryV1().EndpointSlices("kube-system").Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns-e2e", Labels: map[string]string{
			discoveryv1.LabelServiceName: "kube-dns",
			discoveryv1.LabelManagedBy:   "e2e.nodeready.io",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr.To("dns"), Port: ptr.To[int32](53), Protocol: ptr.To(corev1.ProtocolUDP)},
			{Name: ptr.To("dns-tcp"), Port: ptr.To[int32](53), Protocol: ptr.To(corev1.ProtocolTCP)},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return slice
}

// createDNSDeployment creates a stand-in for CoreDNS: like it, it does not tolerate the
// startup taint. Its node selector keeps it to the fleet's nodes.
func createDNSDeployment(t *testing.T, fw *framework.Framework, fleet string) {
	t.Helper()
	labels := map[string]string{"k8s-app": "kube-dns"}
	_, err := fw.Client().AppsV1().Deployments("kube-system").Create(t.Context(), &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "coredns"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{framework.FleetLabel: fleet},
					Containers:   []corev1.Container{{Name: "coredns", Image: "registry.k8s.io/coredns/coredns:v1.12.1"}},
				},
			},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// waitDNSPodReady waits for the DNS Deployment's pod to be Ready and returns it.
func waitDNSPodReady(t *testing.T, fw *framework.Framework) corev1.Pod {
	t.Helper()
	var ready corev1.Pod
	err := framework.Poll(t, func(ctx context.Context) (bool, error) {
		pods, err := fw.Client().CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
		if err != nil {
			return false, nil
		}
		for _, p := range pods.Items {
			if slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
				return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
			}) {
				ready = p
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "the DNS pod never became Ready")
	return ready
}

// waitRounds waits until the agent on node has run at least n more rounds of checks,
// counted in the queries its node's DNS server received (one lookup asks for A and AAAA),
// so a test can tell that what did not happen had its chance.
func waitRounds(t *testing.T, f *framework.Fleet, node string, n int) {
	t.Helper()
	start, _ := f.DNS(node).Queries()
	require.NoError(t, framework.Poll(t, func(context.Context) (bool, error) {
		now, _ := f.DNS(node).Queries()
		return now >= start+2*int64(n), nil
	}), "the agent on %s stopped running rounds", node)
}

// requireNodeKept asserts that the node still exists.
func requireNodeKept(t *testing.T, fw *framework.Framework, node string) {
	t.Helper()
	_, err := fw.Client().CoreV1().Nodes().Get(t.Context(), node, metav1.GetOptions{})
	require.False(t, apierrors.IsNotFound(err), "node %s was deleted", node)
	require.NoError(t, err, "get node %s", node)
}
