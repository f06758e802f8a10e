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
	srv, err := dnstest.NewServer(map[string][]netip.Addr{"kubernetes.default.svc.cluster.local": {netip.MustParseAddr("10.96.0.1")}})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
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
	assert.Contains(t, verified.Note, "podnetwork reached 127.0.0.1 on node-b, 127.0.0.1 on node-c")
	assert.NotContains(t, verified.Note, "on node-a")
	node := client.node(t)
	require.Len(t, node.Status.Conditions, 1)
	assert.Contains(t, node.Status.Conditions[0].Message, "All 2 checks passed; podnetwork reached 127.0.0.1 on node-b, 127.0.0.1 on node-c")
}

// TestPodNetworkNotCheckableAlone: on the first node of a cluster (the only CoreDNS pod runs
// on this node, or none runs) the pod-network check cannot be checked: the node is released,
// and its condition and a Warning PodNetworkNotChecked Event say so.
func TestPodNetworkNotCheckableAlone(t *testing.T) {
	for name, objects := range map[string][]runtime.Object{
		"its own pod only": {coreDNSPod(t, "node-a")},
		"no pod":           nil,
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
