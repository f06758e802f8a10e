package datapath

import (
	"context"
	"net"
	"net/netip"
	"regexp"
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

// startCluster starts the control plane and n real nodes, all started, none tainted; the logs
// are kept when the test fails.
func startCluster(t *testing.T, n int) *realnode.Cluster { return startNodes(t, n, n, n) }

// startNodes starts the control plane and the first started of n real nodes; the first joined
// of them register without nodeready's startup taint.
func startNodes(t *testing.T, n, joined, started int) *realnode.Cluster {
	t.Helper()
	return startClusterWith(t, realnode.ClusterOptions{Nodes: n, JoinedNodes: joined}, started)
}

// startClusterWith starts the control plane and the first started nodes of a cluster with opts;
// the logs are kept when the test fails.
func startClusterWith(t *testing.T, opts realnode.ClusterOptions, started int) *realnode.Cluster {
	t.Helper()
	return framework.New(t, framework.Options{RealNodes: &framework.RealNodes{ClusterOptions: opts, Start: started}}).Real()
}

// TestPodToPodAcrossNodes: a pod on node 1 asks a CoreDNS pod on node 2 a DNS query by the
// CoreDNS pod's IP, over flannel's VXLAN between the nodes' namespaces.
func TestPodToPodAcrossNodes(t *testing.T) {
	c := startCluster(t, 3)
	ctx := t.Context()
	client := c.CP.Client()
	server, err := client.CoreV1().Pods("kube-system").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "dns-on-node-2"},
		Spec: corev1.PodSpec{
			NodeName:           c.Nodes[2].Name(),
			ServiceAccountName: "coredns",
			DNSPolicy:          corev1.DNSDefault,
			Containers: []corev1.Container{{
				Name: "coredns", Image: c.Images.CoreDNS, Args: []string{"-conf", "/etc/coredns/Corefile"},
				VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/coredns", ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{
				ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "coredns"}},
			}}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	sleeper, err := client.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client-on-node-1"},
		Spec: corev1.PodSpec{
			NodeName:   c.Nodes[1].Name(),
			Containers: []corev1.Container{{Name: "pause", Image: c.Images.Pause}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	running := func(ns, name string) *corev1.Pod {
		var pod *corev1.Pod
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
			p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			pod = p
			return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "", nil
		})
		require.NoError(t, err, "pod %s/%s running with an IP: %+v", ns, name, pod)
		return pod
	}
	server = running("kube-system", server.Name)
	sleeper = running("default", sleeper.Name)
	t.Logf("server %s on %s, client %s on %s", server.Status.PodIP, server.Spec.NodeName, sleeper.Status.PodIP, sleeper.Spec.NodeName)
	sIP, cIP := netip.MustParseAddr(server.Status.PodIP), netip.MustParseAddr(sleeper.Status.PodIP)
	require.NotEqual(t, netip.PrefixFrom(sIP, 24).Masked(), netip.PrefixFrom(cIP, 24).Masked(), "the two pods in different nodes' pod CIDRs")

	pids := c.Nodes[1].PodPids(string(sleeper.UID))
	require.NotEmpty(t, pids, "the client pod's processes on node 1")
	var answer []string
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		answer, err = queryFromNetns(pids[0], net.JoinHostPort(server.Status.PodIP, "1053"), "kubernetes.default.svc.cluster.local.")
		if err != nil {
			t.Logf("query from the client pod: %v", err)
			return false, nil
		}
		return true, nil
	})
	require.NoError(t, err, "a DNS answer from the pod on node 2 to the pod on node 1")
	assert.Equal(t, []string{"10.96.0.1"}, answer)
}

// TestJoiningNodeReachesPodsElsewhere: nodeready with the podnetwork check
// (ENABLE_CONNECTIVITY_MATRIX=true, as kube-node-ready's production configuration) verifies a
// node joining a running two-node cluster: its agent pod reaches the CoreDNS pod on another
// node by pod IP, over flannel, and the node is released with every check passed.
func TestJoiningNodeReachesPodsElsewhere(t *testing.T) {
	c, dnsIP, dnsNode := joiningCluster(t)
	ctx := t.Context()
	client := c.CP.Client()

	joining := c.Nodes[2]
	begin := time.Now()
	require.NoError(t, c.StartNodeAt(ctx, 2))
	var node *corev1.Node
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		node, err = client.CoreV1().Nodes().Get(ctx, joining.Name(), metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		_, verified := node.Labels[wellknown.VerifiedLabel]
		return verified && framework.AgentCondition(node) != nil, nil
	})
	require.NoError(t, err, "the joining node verified, with its condition")
	t.Logf("node %s started → verified: %s", joining.Name(), time.Since(begin).Round(time.Millisecond))
	for _, taint := range node.Spec.Taints {
		assert.NotEqual(t, "node-ready/unverified", taint.Key, "the startup taint removed")
	}
	cond := framework.AgentCondition(node)
	assert.Regexp(t, "^All 6 checks passed; podnetwork reached "+reached(dnsIP, dnsNode)+"$", cond.Message)
	// The agent sends its Events asynchronously: the Verified one may follow the label.
	var verified []string
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		events, err := client.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + joining.Name()})
		if err != nil {
			return false, nil
		}
		verified = verified[:0]
		for _, e := range events.Items {
			if e.Reason == "Verified" {
				verified = append(verified, e.Message)
			}
		}
		return len(verified) > 0, nil
	})
	require.NoError(t, err, "no Verified Event about %s", joining.Name())
	require.Len(t, verified, 1)
	t.Logf("Verified: %s", verified[0])
	assert.Regexp(t, "podnetwork reached "+reached(dnsIP, dnsNode), verified[0], "the CoreDNS pod on %s reached by pod IP, the size proven both ways", dnsNode)
}

// TestJoiningNodeReachesPodsAcrossZones: the podnetwork check spreads its pods over zones as
// the EndpointSlice controller reports them from the nodes' topology.kubernetes.io/zone labels.
// Three CoreDNS pods run on three nodes, two of them in zone a and one in zone b; asked for one
// node (POD_NETWORK_NODES=1), and so one spare, the joining node's agent reaches the pod in
// zone b and one in zone a, not two in zone a.
func TestJoiningNodeReachesPodsAcrossZones(t *testing.T) {
	c := startNodes(t, 4, 3, 3)
	ctx := t.Context()
	zones := []string{"zone-a", "zone-a", "zone-b"}
	for i, zone := range zones {
		_, err := c.Kubectl(ctx, "label", "node", c.Nodes[i].Name(), "topology.kubernetes.io/zone="+zone)
		require.NoError(t, err)
	}
	pods := coreDNSOnEveryNode(t, c, 3) // one CoreDNS pod on each running node
	installWithPodNetwork(t, c, 3)
	_, err := c.Kubectl(ctx, "-n", "kube-system", "patch", "configmap", "nodeready-config", "--type=merge",
		`-p={"data":{"POD_NETWORK_NODES":"1"}}`)
	require.NoError(t, err)

	require.NoError(t, c.StartNodeAt(ctx, 3))
	cond := framework.AgentCondition(waitVerified(t, c, c.Nodes[3].Name()))
	t.Logf("condition: %s", cond.Message)
	zoneB := pods[c.Nodes[2].Name()] + " on " + c.Nodes[2].Name()
	assert.Contains(t, cond.Message, zoneB, "the pod in zone b reached")
	inZoneA := 0
	for _, n := range c.Nodes[:2] {
		if strings.Contains(cond.Message, pods[n.Name()]+" on "+n.Name()) {
			inZoneA++
		}
	}
	assert.Equal(t, 1, inZoneA, "one pod of zone a reached, not two")
}

// TestJoiningNodeWithoutPodNetworkIsHeld: a joining node whose VXLAN traffic does not leave it
// (its CNI broken past what the kubelet sees: the node is Ready, pods get addresses) is held
// by the podnetwork check, which names the pod it could not reach; once the traffic flows the
// node is released.
func TestJoiningNodeWithoutPodNetworkIsHeld(t *testing.T) {
	c, dnsIP, dnsNode := joiningCluster(t)
	ctx := t.Context()
	client := c.CP.Client()
	// A failed verification sooner: two rounds of checks that give up after 3s each.
	_, err := c.Kubectl(t.Context(), "-n", "kube-system", "patch", "configmap", "nodeready-config", "--type=merge",
		`-p={"data":{"CHECK_TIMEOUT":"3s","MAX_RETRIES":"2"}}`)
	require.NoError(t, err)

	joining := c.Nodes[2]
	drop := []string{"OUTPUT", "-o", "eth0", "-p", "udp", "--dport", "8472", "-j", "DROP"} // flannel's VXLAN port
	require.NoError(t, joining.InNetns(append([]string{"iptables", "-I"}, drop...)...))
	require.NoError(t, c.StartNodeAt(ctx, 2))
	var held string
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		events, err := client.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + joining.Name()})
		if err != nil {
			return false, nil
		}
		for _, e := range events.Items {
			if e.Reason == "VerificationFailed" {
				held = e.Message
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "VerificationFailed on the joining node")
	node, err := client.CoreV1().Nodes().Get(ctx, joining.Name(), metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotContains(t, node.Labels, wellknown.VerifiedLabel)
	cond := framework.AgentCondition(node)
	require.NotNil(t, cond)
	t.Logf("held: %s; condition: %s", held, cond.Message)
	assert.Contains(t, cond.Message, "podnetwork")
	assert.Contains(t, cond.Message, dnsIP+" on "+dnsNode, "the unreachable CoreDNS pod named")
	assert.Contains(t, cond.Message, "at "+dnsIP+":1053: ", "the pod named as the server asked")

	require.NoError(t, joining.InNetns(append([]string{"iptables", "-D"}, drop...)...))
	fixed := time.Now()
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		node, err = client.CoreV1().Nodes().Get(ctx, joining.Name(), metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		_, verified := node.Labels[wellknown.VerifiedLabel]
		return verified, nil
	})
	require.NoError(t, err, "the node released once its VXLAN traffic flows")
	t.Logf("fixed → verified: %s", time.Since(fixed).Round(time.Millisecond))
}

// joiningCluster starts three real nodes of which the first two have joined and run CoreDNS,
// installs nodeready with the podnetwork check, and returns the cluster with the CoreDNS pod's
// IP and node. The third node, c.Nodes[2], is the tests' joining node: each starts it.
func joiningCluster(t *testing.T) (c *realnode.Cluster, dnsIP, dnsNode string) {
	t.Helper()
	c = startNodes(t, 3, 2, 2)
	dnsIP, dnsNode = readyCoreDNS(t, c)
	installWithPodNetwork(t, c, 2)
	return c, dnsIP, dnsNode
}

// installWithPodNetwork labels the first running nodes verified (nodes of the cluster before
// nodeready: its agent runs on none of them), installs nodeready as a user does and turns the
// podnetwork check on as kube-node-ready's production configuration does.
func installWithPodNetwork(t *testing.T, c *realnode.Cluster, running int) {
	t.Helper()
	for _, n := range c.Nodes[:running] {
		_, err := c.Kubectl(t.Context(), "label", "node", n.Name(), wellknown.VerifiedLabel+"=true")
		require.NoError(t, err)
	}
	require.NoError(t, c.Install(t.Context()))
	_, err := c.Kubectl(t.Context(), "-n", "kube-system", "patch", "configmap", "nodeready-config", "--type=merge",
		`-p={"data":{"ENABLE_CONNECTIVITY_MATRIX":"true"}}`)
	require.NoError(t, err)
}

// readyCoreDNS waits for a ready CoreDNS pod and returns its IP and node.
func readyCoreDNS(t *testing.T, c *realnode.Cluster) (ip, node string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	ip, node, err := c.WaitClusterDNS(ctx)
	require.NoError(t, err, "CoreDNS ready on a running node")
	t.Logf("CoreDNS %s on %s", ip, node)
	return ip, node
}

// TestJoiningNodeReleasedWithoutTheCheck is the evidence of what the podnetwork check
// prevents. The same break as in TestJoiningNodeWithoutPodNetworkIsHeld (the joining node's
// VXLAN traffic dropped while it is Ready and flanneld runs), with checks that do not cross
// the pod network to another node (tcp and apiserver reach the API server on the host): the
// node is released, and a workload pod scheduled there can reach neither the CoreDNS pod on
// another node nor the cluster DNS Service that it backs, until the traffic flows again.
func TestJoiningNodeReleasedWithoutTheCheck(t *testing.T) {
	c := startNodes(t, 3, 2, 2)
	ctx := t.Context()
	dnsIP, dnsNode := readyCoreDNS(t, c)
	for _, n := range c.Nodes[:2] {
		_, err := c.Kubectl(ctx, "label", "node", n.Name(), wellknown.VerifiedLabel+"=true")
		require.NoError(t, err)
	}
	require.NoError(t, c.Install(ctx))
	_, err := c.Kubectl(ctx, "-n", "kube-system", "patch", "configmap", "nodeready-config", "--type=merge",
		`-p={"data":{"CHECKS":"tcp,apiserver"}}`)
	require.NoError(t, err)

	joining := c.Nodes[2]
	drop := []string{"OUTPUT", "-o", "eth0", "-p", "udp", "--dport", "8472", "-j", "DROP"} // flannel's VXLAN port
	require.NoError(t, joining.InNetns(append([]string{"iptables", "-I"}, drop...)...))
	require.NoError(t, c.StartNodeAt(ctx, 2))
	waitVerified(t, c, joining.Name())

	workload := runningPod(t, c, "default", &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "workload-on-joined-node"},
		Spec:       corev1.PodSpec{NodeName: joining.Name(), Containers: []corev1.Container{{Name: "pause", Image: c.Images.Pause}}},
	})
	pids := joining.PodPids(string(workload.UID))
	require.NotEmpty(t, pids, "the workload pod's processes on %s", joining.Name())
	// The backend by its pod IP, and the Service a workload uses: kube-proxy on the joined node
	// sends the cluster DNS address to the same backend on the other node.
	targets := []string{net.JoinHostPort(dnsIP, "1053"), net.JoinHostPort(realnode.ClusterDNS, "53")}
	for _, target := range targets {
		_, err = queryFromNetns(pids[0], target, "kubernetes.default.svc.cluster.local.")
		require.Error(t, err, "the workload pod on the released node reached %s (CoreDNS on %s)", target, dnsNode)
		t.Logf("workload pod on %s → %s (CoreDNS pod %s on %s): %v", joining.Name(), target, dnsIP, dnsNode, err)
	}

	require.NoError(t, joining.InNetns(append([]string{"iptables", "-D"}, drop...)...))
	for _, target := range targets {
		err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			_, err := queryFromNetns(pids[0], target, "kubernetes.default.svc.cluster.local.")
			return err == nil, nil
		})
		require.NoError(t, err, "the same query to %s once the VXLAN traffic flows: the data path was what failed", target)
	}
}

// TestFirstNodesBootstrap: a new cluster whose every node is held. The first node's agent can
// check neither the DNS (no CoreDNS runs anywhere) nor the pod network (no CoreDNS pod on another
// node): it releases the node and says so (DNSNotChecked, PodNetworkNotChecked). CoreDNS then
// runs there, and the next node to join reaches it by pod IP.
func TestFirstNodesBootstrap(t *testing.T) {
	c := startNodes(t, 2, 0, 0)
	ctx := t.Context()
	installWithPodNetwork(t, c, 0)

	require.NoError(t, c.StartNodeAt(ctx, 0))
	first := waitVerified(t, c, c.Nodes[0].Name())
	assert.Contains(t, framework.AgentCondition(first).Message, "cannot be checked: no ready endpoint on another node")
	reasons := map[string]bool{}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		events, err := c.CP.Client().CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + first.Name})
		if err != nil {
			return false, nil
		}
		for _, e := range events.Items {
			reasons[e.Reason] = true
		}
		return reasons["DNSNotChecked"] && reasons["PodNetworkNotChecked"], nil
	})
	require.NoError(t, err, "the first node's Events say what could not be checked: %v", reasons)

	dnsIP, dnsNode := readyCoreDNS(t, c)
	require.Equal(t, first.Name, dnsNode, "CoreDNS on the first released node")
	require.NoError(t, c.StartNodeAt(ctx, 1))
	second := waitVerified(t, c, c.Nodes[1].Name())
	assert.Regexp(t, "^All 6 checks passed; podnetwork reached "+reached(dnsIP, dnsNode)+"$", framework.AgentCondition(second).Message)
}

// waitVerified waits until the node carries the verified label and its condition, and returns it.
func waitVerified(t *testing.T, c *realnode.Cluster, name string) *corev1.Node {
	t.Helper()
	var node *corev1.Node
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := c.CP.Client().CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		node = n
		_, verified := n.Labels[wellknown.VerifiedLabel]
		return verified && framework.AgentCondition(n) != nil, nil
	})
	require.NoError(t, err, "node %s verified, with its condition: %+v", name, node)
	return node
}

// runningPod creates the pod and waits until it runs with an IP.
func runningPod(t *testing.T, c *realnode.Cluster, ns string, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	client := c.CP.Client()
	created, err := client.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{})
	require.NoError(t, err)
	err = wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		created = p
		return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "", nil
	})
	require.NoError(t, err, "pod %s/%s running with an IP: %+v", ns, pod.Name, created.Status)
	return created
}

// reached is the pattern of a pod the podnetwork check reached, with full-size packets both
// ways (TestMTUBlackholeIsHeld compares the size with the pods' MTU).
func reached(ip, node string) string {
	return regexp.QuoteMeta(ip+" on "+node+", ") + "[0-9]+-byte packets both ways"
}
