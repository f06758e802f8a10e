package agent

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodeready/nodeready/checks/dnstest"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// coreDNSPod is the EndpointSlice of one kube-system/kube-dns pod on node, served by a DNS
// server on loopback.
func coreDNSPod(t *testing.T, node string) *discoveryv1.EndpointSlice {
	t.Helper()
	return coreDNSPodOf(t, node, false)
}

// coreDNSPodOf is coreDNSPod, whose server never answers when silent: a pod on a node whose
// data path is broken while the pod stays ready.
func coreDNSPodOf(t *testing.T, node string, silent bool) *discoveryv1.EndpointSlice {
	t.Helper()
	srv, err := dnstest.NewServer(map[string][]netip.Addr{"kubernetes.default.svc.cluster.local": {netip.MustParseAddr("10.96.0.1")}})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	srv.SetSilent(silent)
	host, p, err := net.SplitHostPort(srv.Addr())
	require.NoError(t, err)
	port, err := strconv.Atoi(p)
	require.NoError(t, err)
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "kube-dns-" + node, Namespace: "kube-system", Labels: map[string]string{discoveryv1.LabelServiceName: "kube-dns"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: new("dns"), Port: new(int32(port)), Protocol: new(corev1.ProtocolUDP)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{host}, NodeName: new(node), Conditions: discoveryv1.EndpointConditions{Ready: new(true)}}},
	}
}

// TestPodNetworkCheck: with ENABLE_CONNECTIVITY_MATRIX=true (kube-node-ready's name), the
// agent reaches the CoreDNS pods on other nodes by pod IP with a DNS query, never its own
// node's, and its condition and Verified Event name the pods it reached.
func TestPodNetworkCheck(t *testing.T) {
	client := newCluster(externalNode(), coreDNSPod(t, "node-a"), coreDNSPod(t, "node-b"), coreDNSPod(t, "node-c"))
	a := runNew(t, client, passing, map[string]string{"ENABLE_CONNECTIVITY_MATRIX": "true"})
	waitFor(t, "verified", func() bool { return isVerified(a.Agent) })

	verified := client.waitEvent(t, wellknown.Verified)
	// Each with the full size proven, or said not to be: ping sockets may be closed here.
	assert.Regexp(t, `podnetwork reached 127\.0\.0\.1 on node-b[^;]*; 127\.0\.0\.1 on node-c`, verified.Note)
	assert.NotContains(t, verified.Note, "on node-a")
	node := client.node(t)
	require.Len(t, node.Status.Conditions, 1)
	assert.Regexp(t, `^All 2 checks passed; podnetwork reached 127\.0\.0\.1 on node-b[^;]*; 127\.0\.0\.1 on node-c`, node.Status.Conditions[0].Message)
}

// TestPodNetworkNamesABrokenPeer: a CoreDNS pod on another node that does not answer while
// the others do is that node's fault: the node is released, and a Warning PeerUnreachable
// Event and the condition name the pod and its node.
func TestPodNetworkNamesABrokenPeer(t *testing.T) {
	client := newCluster(externalNode(), coreDNSPodOf(t, "node-broken", true), coreDNSPod(t, "node-b"), coreDNSPod(t, "node-c"))
	a := runNew(t, client, map[string]string{"CHECKS": "podnetwork"})
	waitFor(t, "verified", func() bool { return isVerified(a.Agent) })
	e := client.waitEvent(t, wellknown.PeerUnreachable)
	assert.Equal(t, corev1.EventTypeWarning, e.Type)
	assert.Contains(t, e.Note, "podnetwork could not reach 127.0.0.1 on node-broken: no answer within 2s while 2 other pods answered")
	assert.Contains(t, client.condition(t).Message, "podnetwork could not reach 127.0.0.1 on node-broken")
}

// TestPodNetworkMisconfigured: a Service the check cannot use (no such Service, a typo in
// POD_NETWORK_SERVICE) holds the node as Misconfigured, by name: never a release without
// the check, never a failure of the node.
func TestPodNetworkMisconfigured(t *testing.T) {
	client := newCluster(externalNode(), coreDNSPod(t, "node-b"))
	a := runNew(t, client, map[string]string{"CHECKS": "podnetwork", "POD_NETWORK_SERVICE": "kube-system/kube-dsn"})
	waitFor(t, "misconfigured", func() bool { return client.condition(t).Reason == string(wellknown.Misconfigured) })
	assert.False(t, isVerified(a.Agent))
	assert.Contains(t, client.condition(t).Message, "kube-system/kube-dsn has no EndpointSlices: no such Service, or it selects no pod")
}

// TestPodNetworkNotCheckableAlone: on the first node of a cluster (the only CoreDNS pod runs
// on this node, or none runs) the pod-network check cannot be checked: the node is released,
// and its condition and a Warning PodNetworkNotChecked Event say so.
func TestPodNetworkNotCheckableAlone(t *testing.T) {
	noEndpoint := coreDNSPod(t, "node-b")
	noEndpoint.Endpoints = nil
	for name, objects := range map[string][]runtime.Object{
		"its own pod only": {coreDNSPod(t, "node-a")},
		"no pod yet":       {noEndpoint},
	} {
		t.Run(name, func(t *testing.T) {
			client := newCluster(append(objects, externalNode())...)
			a := runNew(t, client, map[string]string{"CHECKS": "podnetwork"})
			waitFor(t, "verified", func() bool { return isVerified(a.Agent) })
			client.waitEvent(t, wellknown.Verified)
			e := client.waitEvent(t, wellknown.PodNetworkNotChecked)
			assert.Equal(t, corev1.EventTypeWarning, e.Type)
			assert.True(t, strings.HasPrefix(e.Note, "Released without the podnetwork check: podnetwork pods of kube-system/kube-dns on up to 3 other nodes: skipped: cannot be checked: no ready endpoint on another node"), e.Note)
			node := client.node(t)
			assert.Contains(t, node.Status.Conditions[0].Message, "0 of 1 checks passed, podnetwork")
		})
	}
}
