package datapath

import (
	"context"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/realnode"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// TestDualStackJoiningNodeChecksBothFamilies: on a dual-stack cluster (IPv4 first; flanneld
// with a VXLAN device per family) the kube-dns Service's EndpointSlices list the CoreDNS pod in
// both families, and the podnetwork check reaches it by each. A joining node whose IPv6 VXLAN
// traffic does not leave it, while its IPv4 path works, is held: the failure names the pod's
// IPv6 address and not its IPv4 one, which a check of one family would have passed. Once the
// traffic flows the node is released, the condition naming both addresses. Then kube-dns is
// made single-stack, as kubeadm and RKE2 make it, and the node, its IPv6 traffic dropped again,
// is re-verified: released on IPv4 alone, and its condition says IPv6 was not checked.
func TestDualStackJoiningNodeChecksBothFamilies(t *testing.T) {
	c := startClusterWith(t, realnode.ClusterOptions{Nodes: 3, JoinedNodes: 2, DualStack: true}, 2)
	ctx := t.Context()
	client := c.CP.Client()
	dnsCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	dns, err := c.WaitClusterDNSPod(dnsCtx)
	require.NoError(t, err, "CoreDNS ready on a running node")
	v4, v6 := podIPOfFamily(t, dns, false), podIPOfFamily(t, dns, true)
	t.Logf("CoreDNS %s and %s on %s", v4, v6, dns.Spec.NodeName)

	// The EndpointSlice controller's view, which the check reads: a slice per family.
	waitDNSFamilies(t, c, discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6)

	installWithPodNetwork(t, c, 2)
	// A failed verification sooner: two rounds of checks that give up after 3s each.
	_, err = c.Kubectl(ctx, "-n", "kube-system", "patch", "configmap", "nodeready-config", "--type=merge",
		`-p={"data":{"CHECK_TIMEOUT":"3s","MAX_RETRIES":"2"}}`)
	require.NoError(t, err)
	joining := c.Nodes[2]
	drop := []string{"OUTPUT", "-o", "eth0", "-p", "udp", "--dport", "8472", "-j", "DROP"} // flannel's VXLAN port, here over IPv6
	require.NoError(t, joining.InNetns(append([]string{"ip6tables", "-I"}, drop...)...))
	require.NoError(t, c.StartNodeAt(ctx, 2))

	var cond *corev1.NodeCondition
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := client.CoreV1().Nodes().Get(ctx, joining.Name(), metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		cond = framework.AgentCondition(n)
		return cond != nil && cond.Reason == "ChecksFailed", nil
	})
	require.NoError(t, err, "the joining node held by its checks; condition %+v", cond)
	t.Logf("held: %s", cond.Message)
	assert.Contains(t, cond.Message, v6+" on "+dns.Spec.NodeName, "the IPv6 address named")
	assert.NotContains(t, cond.Message, v4+" on ", "the IPv4 address reached")
	n, err := client.CoreV1().Nodes().Get(ctx, joining.Name(), metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotContains(t, n.Labels, wellknown.VerifiedLabel)

	require.NoError(t, joining.InNetns(append([]string{"ip6tables", "-D"}, drop...)...))
	released := waitVerified(t, c, joining.Name())
	t.Logf("released: %s", framework.AgentCondition(released).Message)
	assert.Regexp(t, "podnetwork reached "+reached(v4, dns.Spec.NodeName)+"; "+reached(v6, dns.Spec.NodeName), framework.AgentCondition(released).Message)

	// kube-dns single-stack: its IPv6 slice goes. The same break, and a re-verification once
	// the agent is gone (until then its settle window would put a removed label back).
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=nodeready"})
		return err == nil && len(pods.Items) == 0, nil
	})
	require.NoError(t, err, "the agent pod gone after the release")
	_, err = c.Kubectl(ctx, "-n", "kube-system", "patch", "service", "kube-dns", "--type=merge",
		`-p={"spec":{"ipFamilyPolicy":"SingleStack","ipFamilies":["IPv4"],"clusterIPs":["`+realnode.ClusterDNS+`"]}}`)
	require.NoError(t, err)
	waitDNSFamilies(t, c, discoveryv1.AddressTypeIPv4)
	require.NoError(t, joining.InNetns(append([]string{"ip6tables", "-I"}, drop...)...))
	_, err = c.Kubectl(ctx, "label", "node", joining.Name(), wellknown.VerifiedLabel+"-")
	require.NoError(t, err)
	const notChecked = "podnetwork did not prove IPv6: kube-system/kube-dns lists no IPv6 address of a pod on another node, and this pod has one"
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := client.CoreV1().Nodes().Get(ctx, joining.Name(), metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		_, verified := n.Labels[wellknown.VerifiedLabel]
		cond = framework.AgentCondition(n)
		return verified && cond != nil && strings.Contains(cond.Message, notChecked), nil
	})
	require.NoError(t, err, "re-verified on IPv4 alone, saying IPv6 was not checked; condition %+v", cond)
	t.Logf("re-verified: %s", cond.Message)
	assert.Regexp(t, "podnetwork reached "+reached(v4, dns.Spec.NodeName)+"; "+regexp.QuoteMeta(notChecked), cond.Message)
}

// waitDNSFamilies waits until the kube-dns EndpointSlices have a ready endpoint in exactly
// the address families given.
func waitDNSFamilies(t *testing.T, c *realnode.Cluster, want ...discoveryv1.AddressType) {
	t.Helper()
	families := map[discoveryv1.AddressType]bool{}
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := c.CP.Client().DiscoveryV1().EndpointSlices("kube-system").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=kube-dns"})
		if err != nil {
			return false, nil
		}
		clear(families)
		for _, s := range list.Items {
			for _, ep := range s.Endpoints {
				if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
					families[s.AddressType] = true
				}
			}
		}
		if len(families) != len(want) {
			return false, nil
		}
		for _, f := range want {
			if !families[f] {
				return false, nil
			}
		}
		return true, nil
	})
	require.NoError(t, err, "kube-dns EndpointSlices with ready endpoints in %v; have %v", want, families)
}

// podIPOfFamily returns the pod's address of one family; a pod without it fails t.
func podIPOfFamily(t *testing.T, p *corev1.Pod, ipv6 bool) string {
	t.Helper()
	for _, ip := range p.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil && a.Is6() == ipv6 {
			return ip.IP
		}
	}
	t.Fatalf("pod %s has no address of the family (IPv6 %t): %v", p.Name, ipv6, p.Status.PodIPs)
	return ""
}
