package datapath

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/realnode"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// vxlan matches flannel's VXLAN packets on a node's link (eth0 in its namespace), both ways.
var vxlan = [][]string{
	{"OUTPUT", "-o", "eth0", "-p", "udp", "--dport", "8472"},
	{"INPUT", "-i", "eth0", "-p", "udp", "--dport", "8472"},
}

// dropOnLink adds (op -I) or removes (op -D) rules in the node's namespace that drop its VXLAN
// packets both ways, with match added: the node's pod network broken past what the kubelet sees.
func dropOnLink(t *testing.T, n *realnode.Node, op string, match ...string) {
	t.Helper()
	for _, rule := range vxlan {
		args := append(append([]string{"iptables", op}, rule...), match...)
		require.NoError(t, n.InNetns(append(args, "-j", "DROP")...))
	}
}

// TestMTUBlackholeIsHeld: the joining node's link drops the overlay's packets above 1000 bytes,
// both ways and with no ICMP back, as a link with a smaller MTU than the overlay was built for
// does. A small DNS query crosses to the CoreDNS pod on another node; a 3 KB one does not (both
// proven from a pod on that node). nodeready holds the node, naming the size of the pings
// that were lost, which is the MTU of the pods' interface (never an assumed 1500 or 1450);
// once the link carries full-size packets again, the same agent pod releases it, without a
// restart.
func TestMTUBlackholeIsHeld(t *testing.T) {
	c, dnsIP, dnsNode := joiningCluster(t)
	ctx := t.Context()
	client := c.CP.Client()
	joining := c.Nodes[2]
	large := []string{"-m", "length", "--length", "1000:65535"}
	dropOnLink(t, joining, "-I", large...)
	require.NoError(t, c.StartNodeAt(ctx, 2))

	// The fault is real: from a pod on the joining node, small crosses, large does not.
	workload := runningPod(t, c, "default", &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "workload-on-joining-node"},
		Spec: corev1.PodSpec{NodeName: joining.Name(), Containers: []corev1.Container{{Name: "pause", Image: c.Images.Pause}},
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}},
	})
	pid := joining.PodPids(string(workload.UID))
	require.NotEmpty(t, pid, "the workload pod's processes")
	dns := net.JoinHostPort(dnsIP, "1053")
	_, err := queryFromNetns(pid[0], dns, "kubernetes.default.svc.cluster.local.")
	require.NoError(t, err, "a small query from %s to CoreDNS on %s crosses", joining.Name(), dnsNode)
	_, err = paddedQueryFromNetns(pid[0], dns, "kubernetes.default.svc.cluster.local.", 3000)
	require.Error(t, err, "a 3 KB query from %s to CoreDNS on %s gets no answer", joining.Name(), dnsNode)
	t.Logf("3 KB query from %s: %v", joining.Name(), err)
	mtu, err := linkMTU(pid[0])
	require.NoError(t, err)

	cond := waitCondition(t, c, joining.Name(), func(cond *corev1.NodeCondition) bool {
		return cond.Reason == string(wellknown.ChecksFailed) && strings.Contains(cond.Message, "full-size packets lost")
	})
	t.Logf("held: %s", cond.Message)
	assert.Contains(t, cond.Message, fmt.Sprintf("%s on %s: full-size packets lost: no answer to %d-byte pings with don't-fragment set", dnsIP, dnsNode, mtu),
		"the size named is the pods' MTU, %d", mtu)
	node, err := client.CoreV1().Nodes().Get(ctx, joining.Name(), metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotContains(t, node.Labels, wellknown.VerifiedLabel)
	agent := agentPod(t, c, joining.Name())

	dropOnLink(t, joining, "-D", large...)
	_, err = paddedQueryFromNetns(pid[0], dns, "kubernetes.default.svc.cluster.local.", 3000)
	require.NoError(t, err, "the 3 KB query crosses once the link carries full-size packets")
	released := waitVerified(t, c, joining.Name())
	assert.Contains(t, framework.AgentCondition(released).Message, fmt.Sprintf("%s on %s, %d-byte packets both ways", dnsIP, dnsNode, mtu))
	after, err := client.CoreV1().Pods("kube-system").Get(ctx, agent.Name, metav1.GetOptions{})
	if err == nil { // it may be gone already: the DaemonSet controller deletes it once released
		require.Equal(t, agent.UID, after.UID)
		assert.Zero(t, after.Status.ContainerStatuses[0].RestartCount, "released by the same agent, never restarted")
	}
	assert.Zero(t, agent.Status.ContainerStatuses[0].RestartCount, "the agent that held the node never restarted")
}

// TestBrokenPeerHoldsNoJoiningNode: an existing node's pod network breaks (its VXLAN packets
// dropped both ways) while its CoreDNS pod stays Ready, as the kubelet probes it locally. A
// node that joins after it, with FAILURE_ACTION=replace-node, is released: the broken peer is
// named in its condition and a Warning PeerUnreachable Event, and nothing is replaced.
func TestBrokenPeerHoldsNoJoiningNode(t *testing.T) {
	c := startNodes(t, 4, 3, 3)
	ctx := t.Context()
	client := c.CP.Client()
	pods := coreDNSOnEveryNode(t, c, 3)
	installWithPodNetwork(t, c, 3)
	_, err := c.Kubectl(ctx, "apply", "-f", c.RepoFile("manifests", "replace-node"))
	require.NoError(t, err)
	_, err = c.Kubectl(ctx, "-n", "kube-system", "patch", "configmap", "nodeready-config", "--type=merge",
		`-p={"data":{"FAILURE_ACTION":"replace-node","CHECK_TIMEOUT":"5s","MAX_RETRIES":"2"}}`)
	require.NoError(t, err)

	broken := c.Nodes[1]
	dropOnLink(t, broken, "-I")
	// The fault is real: from a pod on node 0, the CoreDNS pod on the broken node does not
	// answer, the one on node 2 does; and the broken node's CoreDNS pod is still Ready.
	probe := runningPod(t, c, "default", &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "probe-on-node-0"},
		Spec:       corev1.PodSpec{NodeName: c.Nodes[0].Name(), Containers: []corev1.Container{{Name: "pause", Image: c.Images.Pause}}},
	})
	pid := c.Nodes[0].PodPids(string(probe.UID))
	require.NotEmpty(t, pid)
	_, err = queryFromNetns(pid[0], net.JoinHostPort(pods[broken.Name()], "1053"), "kubernetes.default.svc.cluster.local.")
	require.Error(t, err, "CoreDNS on the broken node %s answers a pod on another node", broken.Name())
	_, err = queryFromNetns(pid[0], net.JoinHostPort(pods[c.Nodes[2].Name()], "1053"), "kubernetes.default.svc.cluster.local.")
	require.NoError(t, err, "CoreDNS on %s answers", c.Nodes[2].Name())
	require.Contains(t, readyCoreDNSPods(t, c), broken.Name(), "the broken node's CoreDNS pod still Ready")

	joining := c.Nodes[3]
	require.NoError(t, c.StartNodeAt(ctx, 3))
	node := waitVerified(t, c, joining.Name())
	cond := framework.AgentCondition(node)
	t.Logf("released: %s", cond.Message)
	peer := pods[broken.Name()] + " on " + broken.Name()
	assert.Contains(t, cond.Message, "podnetwork could not reach "+peer)
	assert.Contains(t, cond.Message, pods[c.Nodes[2].Name()]+" on "+c.Nodes[2].Name()+", ")
	events := nodeEvents(t, c, joining.Name(), wellknown.PeerUnreachable)
	require.Len(t, events, 1)
	assert.Equal(t, corev1.EventTypeWarning, events[0].Type)
	assert.Contains(t, events[0].Message, peer)

	for _, n := range []string{broken.Name(), joining.Name()} {
		_, err := client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		assert.NoError(t, err, "node %s not deleted", n)
	}
	assert.Empty(t, listEvents(t, c, joining.Name(), wellknown.ReplacingNode), "nothing replaced")
}

// TestUnreachableFromOtherNodesIsNotProven is the limit of what the podnetwork check proves
// (docs/checks.md: What the pod-network check proves). The joining node drops new connections
// that pods on other nodes open to its pods, while replies to its own pods' connections pass
// (a stateful firewall: a FORWARD rule of a host image). A pod on another node cannot connect
// to the agent's pod (proven); the agent reaches the pods on other nodes and their replies
// come back, so the node is released, and the condition says only what was proven: packets to
// the pods and their replies, never connections opened from elsewhere. The API server's proxy
// to the agent's pod, one design that would open such a connection, is measured here too.
func TestUnreachableFromOtherNodesIsNotProven(t *testing.T) {
	c, dnsIP, dnsNode := joiningCluster(t)
	ctx := t.Context()
	_, err := c.Kubectl(ctx, "-n", "kube-system", "patch", "configmap", "nodeready-config", "--type=merge", `-p={"data":{"MIN_HOLD_TIME":"30s"}}`)
	require.NoError(t, err)
	joining := c.Nodes[2]
	newFromElsewhere := []string{"FORWARD", "-i", "flannel.1", "-m", "conntrack", "--ctstate", "NEW", "-j", "DROP"}
	require.NoError(t, joining.InNetns(append([]string{"iptables", "-I"}, newFromElsewhere...)...))
	require.NoError(t, c.StartNodeAt(ctx, 2))

	// The fault is real: a pod on another node cannot connect to the agent's pod.
	agent := agentPod(t, c, joining.Name())
	probe := runningPod(t, c, "default", &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "probe-on-node-0"},
		Spec:       corev1.PodSpec{NodeName: c.Nodes[0].Name(), Containers: []corev1.Container{{Name: "pause", Image: c.Images.Pause}}},
	})
	pid := c.Nodes[0].PodPids(string(probe.UID))
	require.NotEmpty(t, pid)
	metrics := net.JoinHostPort(agent.Status.PodIP, "8080")
	conn, err := dialFromNetns(pid[0], "tcp", metrics, 3*time.Second)
	if conn != nil {
		conn.Close()
	}
	require.Error(t, err, "a pod on %s connects to the agent's pod on %s", c.Nodes[0].Name(), joining.Name())
	t.Logf("pod on %s → agent pod %s on %s: %v", c.Nodes[0].Name(), metrics, joining.Name(), err)
	body, err := c.CP.Client().CoreV1().Pods("kube-system").ProxyGet("http", agent.Name, "8080", "/healthz", nil).DoRaw(ctx)
	t.Logf("the API server's proxy to the agent's pod: %q, %v", body, err)

	node := waitVerified(t, c, joining.Name())
	cond := framework.AgentCondition(node)
	t.Logf("released: %s", cond.Message)
	assert.Regexp(t, regexp.QuoteMeta(dnsIP+" on "+dnsNode+", ")+`[0-9]+-byte packets both ways`, cond.Message,
		"what was proven: packets to the pod on another node and its replies")
	assert.NotContains(t, cond.Message, "from other nodes", "never a claim about connections opened from elsewhere")
}

// TestClusterDNSUnderAnotherName: the cluster DNS Service is named as on RKE2
// (kube-system/rke2-coredns-rke2-coredns, at the same ClusterIP): with nodeready's defaults
// the podnetwork check finds it from the pods' nameserver and reaches its pods. A typo in
// POD_NETWORK_SERVICE holds the node as Misconfigured, naming the Service, with
// nodeready_misconfigured 1 for the alert, never a release without the check; fixed, the
// node is released. POD_NETWORK_PORT=dns-tcp asks the same pods over TCP.
func TestClusterDNSUnderAnotherName(t *testing.T) {
	c := startNodes(t, 4, 2, 2)
	ctx := t.Context()
	client := c.CP.Client()
	dnsIP, dnsNode := readyCoreDNS(t, c)
	svc, err := client.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, client.CoreV1().Services("kube-system").Delete(ctx, "kube-dns", metav1.DeleteOptions{}))
	renamed := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "rke2-coredns-rke2-coredns", Labels: svc.Labels},
		Spec: corev1.ServiceSpec{Selector: svc.Spec.Selector, ClusterIP: svc.Spec.ClusterIP, Ports: svc.Spec.Ports}}
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Services("kube-system").Create(ctx, renamed, metav1.CreateOptions{})
		if err != nil {
			t.Logf("create %s at %s: %v", renamed.Name, svc.Spec.ClusterIP, err) // until kube-dns's address is free
		}
		return err == nil, nil
	})
	require.NoError(t, err, "the DNS Service renamed, at the same address")
	installWithPodNetwork(t, c, 2)
	_, err = c.Kubectl(ctx, "-n", "kube-system", "patch", "configmap", "nodeready-config", "--type=merge",
		`-p={"data":{"POD_NETWORK_SERVICE":"kube-system/rke2-coredsn"}}`)
	require.NoError(t, err)

	// A typo: held, Misconfigured, by name.
	typo := c.Nodes[2]
	require.NoError(t, c.StartNodeAt(ctx, 2))
	cond := waitCondition(t, c, typo.Name(), func(cond *corev1.NodeCondition) bool {
		return cond.Reason == string(wellknown.Misconfigured)
	})
	t.Logf("held: %s", cond.Message)
	assert.Contains(t, cond.Message, "kube-system/rke2-coredsn has no EndpointSlices: no such Service, or it selects no pod")
	agent := agentPod(t, c, typo.Name())
	pid := typo.PodPids(string(agent.UID))
	require.NotEmpty(t, pid)
	var metrics string
	err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		metrics, err = getFromNetns(ctx, pid[0], "127.0.0.1:8080", "/metrics")
		return err == nil && strings.Contains(metrics, "\nnodeready_misconfigured 1\n"), nil
	})
	require.NoError(t, err, "nodeready_misconfigured 1 on the agent of %s: %s", typo.Name(), metrics)
	node, err := client.CoreV1().Nodes().Get(ctx, typo.Name(), metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotContains(t, node.Labels, wellknown.VerifiedLabel)

	// Fixed, by leaving it to the default: the Service is found under its name.
	_, err = c.Kubectl(ctx, "-n", "kube-system", "patch", "configmap", "nodeready-config", "--type=merge", `-p={"data":{"POD_NETWORK_SERVICE":""}}`)
	require.NoError(t, err)
	require.NoError(t, client.CoreV1().Pods("kube-system").Delete(ctx, agent.Name, metav1.DeleteOptions{}))
	cond = framework.AgentCondition(waitVerified(t, c, typo.Name()))
	t.Logf("released: %s", cond.Message)
	assert.Regexp(t, `podnetwork reached `+regexp.QuoteMeta(dnsIP+" on "+dnsNode+", ")+`[0-9]+-byte packets both ways`, cond.Message)

	// POD_NETWORK_PORT=dns-tcp: the same pods, asked over TCP.
	_, err = c.Kubectl(ctx, "-n", "kube-system", "patch", "configmap", "nodeready-config", "--type=merge", `-p={"data":{"POD_NETWORK_PORT":"dns-tcp"}}`)
	require.NoError(t, err)
	require.NoError(t, c.StartNodeAt(ctx, 3))
	cond = framework.AgentCondition(waitVerified(t, c, c.Nodes[3].Name()))
	t.Logf("released: %s", cond.Message)
	assert.Regexp(t, `podnetwork reached `+regexp.QuoteMeta(dnsIP+" on "+dnsNode+", ")+`[0-9]+-byte packets both ways`, cond.Message)
}

// waitCondition waits until the node's condition satisfies ok and returns it.
func waitCondition(t *testing.T, c *realnode.Cluster, name string, ok func(*corev1.NodeCondition) bool) *corev1.NodeCondition {
	t.Helper()
	var cond *corev1.NodeCondition
	err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := c.CP.Client().CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		cond = framework.AgentCondition(n)
		return cond != nil && ok(cond), nil
	})
	require.NoError(t, err, "the condition of %s: %+v", name, cond)
	return cond
}

// agentPod returns nodeready's agent pod on the node, once it runs with an IP.
func agentPod(t *testing.T, c *realnode.Cluster, node string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := c.CP.Client().CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{
			LabelSelector: "app.kubernetes.io/name=nodeready", FieldSelector: "spec.nodeName=" + node,
		})
		if err != nil {
			return false, nil
		}
		for i := range list.Items {
			p := &list.Items[i]
			if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && p.DeletionTimestamp == nil && len(p.Status.ContainerStatuses) > 0 {
				pod = p
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "nodeready's agent running on %s", node)
	return pod
}

// nodeEvents returns the Events of the reason about the node, once there is one: the agent
// writes its Events in the background, and they may follow the release.
func nodeEvents(t *testing.T, c *realnode.Cluster, node string, reason wellknown.Reason) []corev1.Event {
	t.Helper()
	var out []corev1.Event
	err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		out = listEvents(t, c, node, reason)
		return len(out) > 0, nil
	})
	require.NoError(t, err, "a %s Event about %s", reason, node)
	return out
}

// listEvents returns the Events of the reason about the node there are now.
func listEvents(t *testing.T, c *realnode.Cluster, node string, reason wellknown.Reason) []corev1.Event {
	t.Helper()
	events, err := c.CP.Client().CoreV1().Events("").List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + node + ",reason=" + string(reason)})
	require.NoError(t, err)
	return events.Items
}

// coreDNSOnEveryNode runs one CoreDNS pod on each of the first n nodes and returns their
// IPs by node.
func coreDNSOnEveryNode(t *testing.T, c *realnode.Cluster, n int) map[string]string {
	t.Helper()
	_, err := c.Kubectl(t.Context(), "-n", "kube-system", "patch", "deployment", "coredns", "--type=merge", `-p={"spec":{"replicas":`+strconv.Itoa(n)+`,`+
		`"template":{"spec":{"affinity":{"podAntiAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[`+
		`{"labelSelector":{"matchLabels":{"k8s-app":"kube-dns"}},"topologyKey":"kubernetes.io/hostname"}]}}}}}}`)
	require.NoError(t, err)
	var pods map[string]string
	err = wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
		pods = readyCoreDNSPods(t, c)
		return len(pods) == n, nil
	})
	require.NoError(t, err, "a ready CoreDNS pod on each of %d nodes: %v", n, pods)
	return pods
}

// readyCoreDNSPods returns the IPs of the ready CoreDNS pods by node.
func readyCoreDNSPods(t *testing.T, c *realnode.Cluster) map[string]string {
	t.Helper()
	pods := map[string]string{}
	list, err := c.CP.Client().CoreV1().Pods("kube-system").List(t.Context(), metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
	if err != nil {
		return pods
	}
	for _, p := range list.Items {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Ready && p.DeletionTimestamp == nil {
				pods[p.Spec.NodeName] = p.Status.PodIP
			}
		}
	}
	return pods
}
