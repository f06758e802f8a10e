package checks_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/dns/dnsmessage"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodeready/nodeready/checks"
	"github.com/nodeready/nodeready/checks/dnstest"
	"github.com/nodeready/nodeready/internal/kube/adapt"
)

var kubeDNS = checks.NamedDNSService(types.NamespacedName{Namespace: "kube-system", Name: "kube-dns"})

// podSlice is an EndpointSlice of kube-system/kube-dns with one endpoint, the pod at addr
// (host:port) on node in zone, its port named like CoreDNS's.
func podSlice(t *testing.T, name, addr, node, zone string, protocol corev1.Protocol) *discoveryv1.EndpointSlice {
	t.Helper()
	host, port := splitPort(t, addr)
	ep := endpoint(host, new(true))
	ep.NodeName = new(node)
	if zone != "" {
		ep.Zone = new(zone)
	}
	portName := map[corev1.Protocol]string{corev1.ProtocolUDP: "dns", corev1.ProtocolTCP: "dns-tcp"}[protocol]
	s := endpointSlice(name, "kube-dns", []discoveryv1.EndpointPort{{Name: new(portName), Port: new(port), Protocol: new(protocol)}}, ep)
	s.Namespace = "kube-system"
	if netip.MustParseAddr(host).Is6() {
		s.AddressType = discoveryv1.AddressTypeIPv6
	}
	return s
}

// coreDNSSlice is podSlice with CoreDNS's two ports: dns (UDP) at udp and dns-tcp (TCP) at tcp.
func coreDNSSlice(t *testing.T, name, udp, tcp, node string) *discoveryv1.EndpointSlice {
	t.Helper()
	s := podSlice(t, name, udp, node, "", corev1.ProtocolUDP)
	_, port := splitPort(t, tcp)
	s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: new("dns-tcp"), Port: new(port), Protocol: new(corev1.ProtocolTCP)})
	return s
}

func splitPort(t *testing.T, addr string) (string, int32) {
	t.Helper()
	host, p, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	port, err := strconv.Atoi(p)
	require.NoError(t, err)
	return host, int32(port)
}

func dnsPod(t *testing.T) *dnstest.Server {
	t.Helper()
	s, err := dnstest.NewServer(map[string][]netip.Addr{"kubernetes.default.svc.cluster.local": {netip.MustParseAddr("10.96.0.1")}})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

func queried(s *dnstest.Server) int64 { n, _ := s.Queries(); return n }

// fullSize stands for the full-size ping: every pod answers packets of size both ways.
func fullSize(size int) func(context.Context, netip.Addr) (int, error) {
	return func(context.Context, netip.Addr) (int, error) { return size, nil }
}

// fullSizeErr stands for a full-size ping that proves no size.
func fullSizeErr(err error) func(context.Context, netip.Addr) (int, error) {
	return func(context.Context, netip.Addr) (int, error) { return 0, err }
}

// TestPodNetworkReachesPodsOnOtherNodes: the check asks a DNS query of CoreDNS pods on other
// nodes, taken in turn from each zone, never its own node's pod, and proves full-size
// packets with each; it names the pods it reached and the size proven.
func TestPodNetworkReachesPodsOnOtherNodes(t *testing.T) {
	own, a1, a2, b1 := dnsPod(t), dnsPod(t), dnsPod(t), dnsPod(t)
	client := fake.NewClientset(
		podSlice(t, "own", own.Addr(), "node-self", "zone-a", corev1.ProtocolUDP),
		podSlice(t, "a1", a1.Addr(), "node-a1", "zone-a", corev1.ProtocolUDP),
		podSlice(t, "a2", a2.Addr(), "node-a2", "zone-a", corev1.ProtocolUDP),
		podSlice(t, "b1", b1.Addr(), "node-b1", "zone-b", corev1.ProtocolUDP),
	)
	// One node wanted, and a spare: the first node of each zone in this agent's order.
	c := checks.NewPodNetwork(adapt.Clientset(client), "node-self", kubeDNS, 1, checks.PodProbe{DNSName: "kubernetes.default.svc.cluster.local",
		LocalAddrs: podAddrs("10.244.0.5/24"), FullSize: fullSize(1450)})
	requireIdentity(t, c, "podnetwork", "pods of kube-system/kube-dns on up to 1 other nodes")

	res := checks.Execute(t.Context(), c, 5*time.Second)
	require.NoError(t, res.Err)
	assert.Positive(t, queried(b1), "the node of zone b")
	assert.Equal(t, int64(1), queried(a1)+queried(a2), "one node of zone a")
	assert.Zero(t, queried(own), "its own node's pod")
	require.Len(t, res.Report.Reached, 2)
	assert.Contains(t, res.Report.Reached, "127.0.0.1 on node-b1, 1450-byte packets both ways")
	assert.Empty(t, res.Report.NotProven)
	assert.Empty(t, res.Report.Unreachable)
}

// TestPodNetworkAgentsSpreadOverPeers: agents of different nodes take the pods of one zone in
// different orders, so that a scale-up does not probe the same pods from every new node.
func TestPodNetworkAgentsSpreadOverPeers(t *testing.T) {
	var objects []runtime.Object
	for i := range 6 {
		objects = append(objects, podSlice(t, fmt.Sprint("p", i), dnsPod(t).Addr(), fmt.Sprint("old-", i), "zone-a", corev1.ProtocolUDP))
	}
	client := fake.NewClientset(objects...)
	first := map[string]bool{}
	for i := range 20 {
		c := checks.NewPodNetwork(adapt.Clientset(client), fmt.Sprint("new-", i), kubeDNS, 1, checks.PodProbe{DNSName: "kubernetes.default.svc.cluster.local", FullSize: fullSize(1450)})
		res := checks.Execute(t.Context(), c, 5*time.Second)
		require.NoError(t, res.Err)
		first[res.Report.Reached[0]] = true
	}
	assert.Greater(t, len(first), 2, "20 new nodes begin with more than two of the 6 old ones: %v", first)
}

// TestPodNetworkBrokenPeerIsNotABrokenNode: a pod that does not answer is replaced by a pod
// on another node; the check passes while this node reaches at least as many pods as it
// cannot, and names the pod that did not answer, with its node, as another node's fault.
// When it reaches fewer, the failure is this node's.
func TestPodNetworkBrokenPeerIsNotABrokenNode(t *testing.T) {
	silent, b, c1 := dnsPod(t), dnsPod(t), dnsPod(t)
	silent.SetSilent(true)
	client := fake.NewClientset(
		podSlice(t, "silent", silent.Addr(), "node-broken", "", corev1.ProtocolUDP),
		podSlice(t, "b", b.Addr(), "node-b", "", corev1.ProtocolUDP),
		podSlice(t, "c", c1.Addr(), "node-c", "", corev1.ProtocolUDP),
	)
	c := checks.NewPodNetwork(adapt.Clientset(client), "node-new", kubeDNS, 2, checks.PodProbe{DNSName: "kubernetes.default.svc.cluster.local", FullSize: fullSize(1450)})
	res := checks.Execute(t.Context(), c, 5*time.Second)
	require.NoError(t, res.Err)
	assert.Len(t, res.Report.Reached, 2)
	require.Len(t, res.Report.Unreachable, 1)
	assert.Contains(t, res.Report.Unreachable[0], "127.0.0.1 on node-broken: no answer within 2s while 2 other pods answered")

	// Two of three peers broken: this node is the likelier fault.
	b.SetSilent(true)
	res = checks.Execute(t.Context(), c, time.Second) // within the 2s the others have once one answered
	require.Error(t, res.Err)
	assert.Equal(t, "fail", res.Status())
	assert.Contains(t, res.Err.Error(), "IPv4: this node reaches 1 of 3 pods on other nodes: ")
	assert.Contains(t, res.Err.Error(), "127.0.0.1 on node-broken: ")
	assert.Contains(t, res.Err.Error(), "127.0.0.1 on node-b: ")
	// The pod is the server asked, not the agent's resolv.conf's.
	assert.Contains(t, res.Err.Error(), "at "+silent.Addr()+": ", "the pod named as the server asked")
}

// TestPodNetworkOnePeer: with one other node to probe, a peer that does not answer and a node
// that reaches nothing look the same: the node is held, as a failure nobody's can be told
// (Unattributed), never one of its own. With two peers silent, the fault is this node's.
func TestPodNetworkOnePeer(t *testing.T) {
	silent := dnsPod(t)
	silent.SetSilent(true)
	probe := checks.PodProbe{DNSName: "kubernetes.default.svc.cluster.local", FullSize: fullSize(1450)}
	one := checks.NewPodNetwork(adapt.Clientset(fake.NewClientset(podSlice(t, "b", silent.Addr(), "node-b", "", corev1.ProtocolUDP))), "node-new", kubeDNS, 3, probe)
	res := checks.Execute(t.Context(), one, time.Second)
	require.Error(t, res.Err)
	assert.Equal(t, "fail", res.Status(), "held")
	assert.True(t, res.Unattributed(), "not this node's fault: %v", res.Err)
	assert.ErrorContains(t, res.Err, "IPv4: this node reaches 0 of 1 pods on other nodes: 127.0.0.1 on node-b: ")
	assert.ErrorContains(t, res.Err, "the only other node with a pod to probe")

	// Full-size packets lost to the one peer: its path or this node's, the same.
	lost := checks.NewPodNetwork(adapt.Clientset(fake.NewClientset(podSlice(t, "b", dnsPod(t).Addr(), "node-b", "", corev1.ProtocolUDP))), "node-new", kubeDNS, 3,
		checks.PodProbe{DNSName: "kubernetes.default.svc.cluster.local", FullSize: fullSizeErr(fmt.Errorf("%w: no answer to 1450-byte pings", checks.ErrFullSizeLost))})
	res = checks.Execute(t.Context(), lost, 5*time.Second)
	require.Error(t, res.Err)
	assert.True(t, res.Unattributed(), "%v", res.Err)

	other := dnsPod(t)
	other.SetSilent(true)
	two := checks.NewPodNetwork(adapt.Clientset(fake.NewClientset(
		podSlice(t, "b", silent.Addr(), "node-b", "", corev1.ProtocolUDP),
		podSlice(t, "c", other.Addr(), "node-c", "", corev1.ProtocolUDP),
	)), "node-new", kubeDNS, 3, probe)
	res = checks.Execute(t.Context(), two, time.Second)
	require.Error(t, res.Err)
	assert.False(t, res.Unattributed(), "two peers silent: this node's fault: %v", res.Err)
	assert.ErrorContains(t, res.Err, "IPv4: this node reaches 0 of 2 pods on other nodes: ")
}

// TestPodNetworkEveryZone: a release proves that this node reaches a pod in every zone where
// it probed pods of two nodes or more. A zone none of whose pods answer while the other
// zone's do holds the node, with nobody's fault told (the zone's outage, or this node's way
// to it); one silent pod, alone in its zone, is one broken peer.
func TestPodNetworkEveryZone(t *testing.T) {
	// zoneSlices is one pod on a node of its own in zone per entry of silent, which says
	// whether that pod answers.
	zoneSlices := func(zone string, silent ...bool) []runtime.Object {
		var out []runtime.Object
		for i, silent := range silent {
			pod := dnsPod(t)
			pod.SetSilent(silent)
			out = append(out, podSlice(t, fmt.Sprintf("%s-%d", zone, i), pod.Addr(), fmt.Sprintf("node-%s-%d", zone, i), zone, corev1.ProtocolUDP))
		}
		return out
	}
	run := func(nodes int, objects ...[]runtime.Object) checks.Result {
		t.Helper()
		client := fake.NewClientset(slices.Concat(objects...)...)
		c := checks.NewPodNetwork(adapt.Clientset(client), "node-new", kubeDNS, nodes,
			checks.PodProbe{DNSName: "kubernetes.default.svc.cluster.local", FullSize: fullSize(1450), LocalAddrs: podAddrs("10.244.0.5/24")})
		return checks.Execute(t.Context(), c, 5*time.Second)
	}

	// Two nodes of each zone probed: as many pods reached as not, but none in zone-b.
	res := run(2, zoneSlices("zone-a", false, false), zoneSlices("zone-b", true, true))
	require.Error(t, res.Err)
	assert.Equal(t, "fail", res.Status(), "held")
	assert.True(t, res.Unattributed(), "%v", res.Err)
	assert.ErrorContains(t, res.Err, "IPv4: this node reaches none of the 2 pods in zone zone-b, while it reaches 2 in other zones: 127.0.0.1 on node-zone-b-")

	// One of zone-b's two answers: released, the other named.
	res = run(2, zoneSlices("zone-a", false, false), zoneSlices("zone-b", true, false))
	require.NoError(t, res.Err)
	require.Len(t, res.Report.Unreachable, 1)
	assert.Contains(t, res.Report.Unreachable[0], "on node-zone-b-0: ")

	// The one pod probed in zone-b does not answer: a broken peer, released.
	res = run(1, zoneSlices("zone-a", false), zoneSlices("zone-b", true))
	require.NoError(t, res.Err)
	assert.Len(t, res.Report.Unreachable, 1)
}

// TestPodNetworkFullSize: packets of the route's full size lost to every pod while queries
// pass (an MTU blackhole) fail the check with the size; where no ping can be sent, one full
// TCP segment proves the way out, and the pass says the way back was not checked; where
// neither can be sent, it says full size was not checked. A pass never claims a size it
// did not send.
func TestPodNetworkFullSize(t *testing.T) {
	srv := dnsPod(t)
	client := fake.NewClientset(coreDNSSlice(t, "b", srv.Addr(), srv.Addr(), "node-b"))
	probe := func(fs func(context.Context, netip.Addr) (int, error)) *checks.PodNetwork {
		return checks.NewPodNetwork(adapt.Clientset(client), "node-a", kubeDNS, 1, checks.PodProbe{DNSName: "kubernetes.default.svc.cluster.local", FullSize: fs, LocalAddrs: podAddrs("10.244.0.5/24")})
	}

	lost := checks.Execute(t.Context(), probe(fullSizeErr(fmt.Errorf("%w: no answer to 1450-byte pings with don't-fragment set, while 84-byte ones are answered", checks.ErrFullSizeLost))), 5*time.Second)
	require.Error(t, lost.Err)
	assert.Equal(t, "fail", lost.Status())
	assert.ErrorContains(t, lost.Err, "127.0.0.1 on node-b: full-size packets lost: no answer to 1450-byte pings")

	noPing := fmt.Errorf("%w: this pod may not open a ping socket", checks.ErrFullSizeNotChecked)
	before := queried(srv)
	out := checks.Execute(t.Context(), probe(fullSizeErr(noPing)), 5*time.Second)
	require.NoError(t, out.Err)
	assert.Equal(t, int64(2), queried(srv)-before, "the query, and the padded query over TCP")
	require.Len(t, out.Report.Reached, 1)
	assert.Regexp(t, `^127\.0\.0\.1 on node-b, [0-9]+-byte packets out$`, out.Report.Reached[0])
	assert.Equal(t, []string{"full-size packets back with 127.0.0.1 on node-b: this pod may not open a ping socket"}, out.Report.NotProven)

	// A router on the way answers the route's full size with "fragmentation needed", and the
	// path's size crosses both ways: path-MTU discovery, a pass that names both sizes.
	smaller := checks.Execute(t.Context(), probe(func(context.Context, netip.Addr) (int, error) {
		return 1400, fmt.Errorf("%w: this pod's route sends 1500-byte packets, the path to 127.0.0.1 carries 1400 (an ICMP error said so: path-MTU discovery works)", checks.ErrPathSmaller)
	}), 5*time.Second)
	require.NoError(t, smaller.Err)
	assert.Equal(t, []string{"127.0.0.1 on node-b, 1400-byte packets both ways"}, smaller.Report.Reached)
	assert.Equal(t, []string{"packets of the route's MTU with 127.0.0.1 on node-b: this pod's route sends 1500-byte packets, the path to 127.0.0.1 carries 1400 (an ICMP error said so: path-MTU discovery works)"},
		smaller.Report.NotProven)

	// The TCP port takes the padded query and never answers: the way out loses full size.
	silent := silentTCP(t)
	lostOut := checks.NewPodNetwork(adapt.Clientset(fake.NewClientset(coreDNSSlice(t, "b", srv.Addr(), silent, "node-b"))), "node-a", kubeDNS, 1,
		checks.PodProbe{DNSName: "kubernetes.default.svc.cluster.local", FullSize: fullSizeErr(noPing)})
	res := checks.Execute(t.Context(), lostOut, time.Second)
	require.Error(t, res.Err)
	assert.ErrorContains(t, res.Err, "full-size packets lost: no answer to a ")

	// The query crossed over UDP and no TCP connection opens (a policy that allows UDP/53
	// only): full size is not proven, and the node's path is not blamed.
	refused := checks.NewPodNetwork(adapt.Clientset(fake.NewClientset(coreDNSSlice(t, "b", srv.Addr(), closedAddr(t), "node-b"))), "node-a", kubeDNS, 1,
		checks.PodProbe{DNSName: "kubernetes.default.svc.cluster.local", FullSize: fullSizeErr(noPing), LocalAddrs: podAddrs("10.244.0.5/24")})
	res = checks.Execute(t.Context(), refused, 5*time.Second)
	require.NoError(t, res.Err)
	assert.Equal(t, []string{"127.0.0.1 on node-b"}, res.Report.Reached)
	require.Len(t, res.Report.NotProven, 1)
	assert.Contains(t, res.Report.NotProven[0], "full-size packets with 127.0.0.1 on node-b: this pod may not open a ping socket; and no TCP connection to send a full segment in (no TCP connection: dial tcp ")

	// A TCP connection alone sends nothing a full segment could be part of.
	tcp := checks.NewPodNetwork(adapt.Clientset(fake.NewClientset(podSlice(t, "b", silent, "node-b", "", corev1.ProtocolTCP))), "node-a", kubeDNS, 1,
		checks.PodProbe{FullSize: fullSizeErr(noPing), LocalAddrs: podAddrs("10.244.0.5/24")})
	res = checks.Execute(t.Context(), tcp, time.Second)
	require.NoError(t, res.Err)
	assert.Equal(t, []string{"127.0.0.1 on node-b"}, res.Report.Reached)
	assert.Equal(t, []string{"full-size packets with 127.0.0.1 on node-b: this pod may not open a ping socket"}, res.Report.NotProven)
}

// TestPodNetworkTCPSegmentOverHTTP: the HTTP probe's full segment is a GET with a padding
// header, whose answer proves the way out.
func TestPodNetworkTCPSegmentOverHTTP(t *testing.T) {
	var sizes []int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sizes = append(sizes, len(r.Header.Get("X-Padding")))
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	client := fake.NewClientset(podSlice(t, "web", srv.Listener.Addr().String(), "node-b", "", corev1.ProtocolTCP))
	c := checks.NewPodNetwork(adapt.Clientset(client), "node-a", kubeDNS, 1, checks.PodProbe{HTTPPath: "/healthz",
		FullSize: fullSizeErr(fmt.Errorf("%w: no ping", checks.ErrFullSizeNotChecked))})
	res := checks.Execute(t.Context(), c, 5*time.Second)
	require.NoError(t, res.Err)
	require.Len(t, sizes, 2, "the GET, and the padded GET")
	assert.Zero(t, sizes[0])
	assert.Greater(t, sizes[1], 1000, "padded to a full segment of loopback")
}

// TestPodNetworkAnswersAreAnswers: any DNS answer proves the path, SERVFAIL and REFUSED
// included; an HTTP redirect is an answer, never followed.
func TestPodNetworkAnswersAreAnswers(t *testing.T) {
	for _, rcode := range []dnsmessage.RCode{dnsmessage.RCodeServerFailure, dnsmessage.RCodeRefused, dnsmessage.RCodeNameError} {
		t.Run(rcode.String(), func(t *testing.T) {
			addr := rcodeServer(t, rcode)
			c := checks.NewPodNetwork(adapt.Clientset(fake.NewClientset(podSlice(t, "b", addr, "node-b", "", corev1.ProtocolUDP))), "node-a", kubeDNS, 1,
				checks.PodProbe{DNSName: "kubernetes.default.svc.cluster.local", FullSize: fullSize(1450)})
			require.NoError(t, checks.Execute(t.Context(), c, 2*time.Second).Err)
		})
	}
	t.Run("redirect", func(t *testing.T) {
		srv := httptest.NewServer(http.RedirectHandler("http://192.0.2.1/unreachable", http.StatusFound))
		t.Cleanup(srv.Close)
		c := checks.NewPodNetwork(adapt.Clientset(fake.NewClientset(podSlice(t, "web", srv.Listener.Addr().String(), "node-b", "", corev1.ProtocolTCP))), "node-a", kubeDNS, 1,
			checks.PodProbe{HTTPPath: "/", FullSize: fullSize(1450)})
		require.NoError(t, checks.Execute(t.Context(), c, 2*time.Second).Err)
	})
}

// rcodeServer answers every UDP query with rcode, and returns its address.
func rcodeServer(t *testing.T, rcode dnsmessage.RCode) string {
	return udpDNS(t, func(_ int32, m *dnsmessage.Message) bool {
		m.Header.RCode = rcode
		return true
	})
}

// udpDNS serves DNS over UDP on loopback and returns its address. Each query it
// parses goes to answer with its number (from 1), which may change the response
// and says whether to send it.
func udpDNS(t *testing.T, answer func(n int32, m *dnsmessage.Message) bool) string {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { pc.Close() })
	go func() {
		var queries int32
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var m dnsmessage.Message
			if m.Unpack(buf[:n]) != nil {
				continue
			}
			queries++
			m.Header.Response = true
			if !answer(queries, &m) {
				continue
			}
			if b, err := m.Pack(); err == nil {
				_, _ = pc.WriteTo(b, from)
			}
		}
	}()
	return pc.LocalAddr().String()
}

// TestPodNetworkDNSOverTCP: POD_NETWORK_PORT=dns-tcp, CoreDNS's TCP port, sends the DNS
// query over TCP to it.
func TestPodNetworkDNSOverTCP(t *testing.T) {
	srv := dnsPod(t)
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0") // the UDP port reads and never answers
	require.NoError(t, err)
	t.Cleanup(func() { pc.Close() })
	client := fake.NewClientset(coreDNSSlice(t, "b", pc.LocalAddr().String(), srv.Addr(), "node-b"))
	c := checks.NewPodNetwork(adapt.Clientset(client), "node-a", kubeDNS, 1, checks.PodProbe{DNSName: "kubernetes.default.svc.cluster.local", Port: "dns-tcp", FullSize: fullSize(1450)})
	require.NoError(t, checks.Execute(t.Context(), c, 2*time.Second).Err)
	assert.Positive(t, queried(srv))
}

// TestPodNetworkWhatCannotBeChecked: "no ready endpoint on another node" is a skip only when
// the Service's slices carry the port and no ready endpoint is elsewhere (the first node, a
// cluster whose DNS runs nowhere yet). A Service with no slices, no such port, or ready
// endpoints that do not name their node is the configuration's fault: misconfigured, named.
func TestPodNetworkWhatCannotBeChecked(t *testing.T) {
	own := dnsPod(t)
	notReady := podSlice(t, "b", "127.0.0.1:53", "node-b", "", corev1.ProtocolUDP)
	notReady.Endpoints[0].Conditions.Ready = new(false)
	empty := podSlice(t, "b", "127.0.0.1:53", "node-b", "", corev1.ProtocolUDP)
	empty.Endpoints, empty.Ports = nil, nil // as the EndpointSlice controller keeps a Service without endpoints
	noNode := podSlice(t, "b", "127.0.0.1:53", "node-b", "", corev1.ProtocolUDP)
	noNode.Endpoints[0].NodeName = nil
	for _, tt := range []struct {
		name    string
		port    string
		objects []runtime.Object
		status  string
		says    string
	}{
		{"only its own pod", "", []runtime.Object{podSlice(t, "own", own.Addr(), "node-a", "", corev1.ProtocolUDP)}, "skip", "this node node-a"},
		{"not ready elsewhere", "", []runtime.Object{notReady}, "skip", "has no ready endpoint anywhere"},
		{"no endpoint yet", "", []runtime.Object{empty}, "skip", "has no ready endpoint anywhere"},
		{"no slices", "", nil, "misconfigured", "kube-system/kube-dns has no EndpointSlices: no such Service, or it selects no pod"},
		{"no such port", "metrics", []runtime.Object{notReady}, "misconfigured", "have no UDP port metrics"},
		{"no such port, a pod ready", "metrics", []runtime.Object{podSlice(t, "b", "127.0.0.1:53", "node-b", "", corev1.ProtocolUDP)}, "misconfigured", "have no UDP port metrics"},
		{"endpoints without nodeName", "", []runtime.Object{noNode}, "misconfigured", "do not name their node"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := checks.NewPodNetwork(adapt.Clientset(fake.NewClientset(tt.objects...)), "node-a", kubeDNS, 3,
				checks.PodProbe{DNSName: "kubernetes.default.svc.cluster.local", Port: tt.port, FullSize: fullSize(1450)})
			res := checks.Execute(t.Context(), c, time.Second)
			assert.Equal(t, tt.status, res.Status())
			assert.ErrorContains(t, res.Err, tt.says)
			if tt.status == "skip" {
				assert.ErrorIs(t, res.Err, checks.ErrNoPodsElsewhere)
			}
		})
	}
}

// TestPodNetworkTCPAndHTTP: another Service is probed with a TCP connection on its first
// TCP port, or with an HTTP GET where a path is given (any status is an answer).
func TestPodNetworkTCPAndHTTP(t *testing.T) {
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.Path)
		w.WriteHeader(http.StatusNotFound)
	}))
	t.Cleanup(srv.Close)
	client := fake.NewClientset(podSlice(t, "web", srv.Listener.Addr().String(), "node-b", "", corev1.ProtocolTCP))

	tcp := checks.NewPodNetwork(adapt.Clientset(client), "node-a", kubeDNS, 3, checks.PodProbe{FullSize: fullSize(1450)})
	require.NoError(t, checks.Execute(t.Context(), tcp, time.Second).Err)
	assert.Empty(t, paths, "a TCP connection only")

	web := checks.NewPodNetwork(adapt.Clientset(client), "node-a", kubeDNS, 3, checks.PodProbe{HTTPPath: "/healthz", Port: "dns-tcp", FullSize: fullSize(1450)})
	require.NoError(t, checks.Execute(t.Context(), web, time.Second).Err)
	assert.Equal(t, []string{"/healthz"}, paths)

	srv.Close()
	res := checks.Execute(t.Context(), tcp, time.Second)
	assert.ErrorContains(t, res.Err, "127.0.0.1 on node-b")
}

// TestPodNetworkDualStack: a dual-stack Service's pod on another node is reached in each
// address family.
func TestPodNetworkDualStack(t *testing.T) {
	listen := func(network, addr string) string {
		ln, err := net.Listen(network, addr)
		require.NoError(t, err)
		return acceptAll(t, ln)
	}
	v4, v6 := listen("tcp4", "127.0.0.1:0"), listen("tcp6", "[::1]:0")
	client := fake.NewClientset(
		podSlice(t, "v4", v4, "node-b", "", corev1.ProtocolTCP),
		podSlice(t, "v6", v6, "node-b", "", corev1.ProtocolTCP),
	)
	c := checks.NewPodNetwork(adapt.Clientset(client), "node-a", kubeDNS, 1, checks.PodProbe{LocalAddrs: podAddrs("10.244.0.5/24", "fd00:10:244::5/64"), FullSize: fullSize(1450)})
	res := checks.Execute(t.Context(), c, time.Second)
	require.NoError(t, res.Err)
	assert.Equal(t, []string{"127.0.0.1 on node-b, 1450-byte packets both ways", "::1 on node-b, 1450-byte packets both ways"}, res.Report.Reached)
}

// TestPodNetworkSaysWhichFamilyWasNotChecked: on a dual-stack pod, a Service whose
// EndpointSlices list only IPv4 (a single-stack kube-dns on a dual-stack cluster) passes on
// its IPv4 pods, and the pass says IPv6 was not proven; an IPv4-only pod, or link-local and
// loopback IPv6 addresses, do not make it say so.
func TestPodNetworkSaysWhichFamilyWasNotChecked(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	client := fake.NewClientset(podSlice(t, "v4", acceptAll(t, ln), "node-b", "", corev1.ProtocolTCP))
	for _, tt := range []struct {
		addrs []string
		want  []string
	}{
		{[]string{"10.244.0.5/24", "fd00:10:244::5/64", "fe80::1/64", "::1/128"},
			[]string{"IPv6: kube-system/kube-dns lists no IPv6 address of a pod on another node, and this pod has one"}},
		{[]string{"10.244.0.5/24", "fe80::1/64", "::1/128"}, nil},
	} {
		c := checks.NewPodNetwork(adapt.Clientset(client), "node-a", kubeDNS, 1, checks.PodProbe{LocalAddrs: podAddrs(tt.addrs...), FullSize: fullSize(1450)})
		res := checks.Execute(t.Context(), c, time.Second)
		require.NoError(t, res.Err)
		assert.Equal(t, []string{"127.0.0.1 on node-b, 1450-byte packets both ways"}, res.Report.Reached)
		assert.Equal(t, tt.want, res.Report.NotProven, "pod addresses %v", tt.addrs)
	}
}

// TestDNSServiceIsFound: the cluster DNS Service is found whatever its name: from the
// IPAddress of the resolv.conf's nameserver, else from the EndpointSlices labelled
// k8s-app=kube-dns in kube-system, else taken for kube-system/kube-dns.
func TestDNSServiceIsFound(t *testing.T) {
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	require.NoError(t, os.WriteFile(resolv, []byte("search default.svc.cluster.local\nnameserver 10.43.0.10\noptions ndots:5\n"), 0o644))
	ip := &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "10.43.0.10"},
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Resource: "services", Namespace: "kube-system", Name: "rke2-coredns-rke2-coredns"}}}
	labelled := endpointSlice("dns-default-x", "dns-default", nil)
	labelled.Namespace, labelled.Labels["k8s-app"] = "kube-system", "kube-dns"
	for _, tt := range []struct {
		name    string
		objects []runtime.Object
		want    string
	}{
		{"by its address", []runtime.Object{ip, labelled}, "kube-system/rke2-coredns-rke2-coredns"},
		{"by its label", []runtime.Object{labelled}, "kube-system/dns-default"},
		{"neither", nil, "kube-system/kube-dns"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := checks.FindDNSService(adapt.Clientset(fake.NewClientset(tt.objects...)), resolv).Get(t.Context())
			require.NoError(t, err)
			assert.Equal(t, tt.want, got.String())
		})
	}
}

// silentTCP accepts connections, reads them and never answers, as a pod whose replies are
// lost; it returns its address.
func silentTCP(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	return serveConns(t, ln, func(conn net.Conn) {
		go func() {
			defer conn.Close()
			_, _ = io.Copy(io.Discard, bufio.NewReader(conn))
		}()
	})
}

// podAddrs stands for the agent pod's interface addresses.
func podAddrs(prefixes ...string) func() ([]net.Addr, error) {
	return func() ([]net.Addr, error) {
		var out []net.Addr
		for _, p := range prefixes {
			ip, n, err := net.ParseCIDR(p)
			if err != nil {
				return nil, err
			}
			out = append(out, &net.IPNet{IP: ip, Mask: n.Mask})
		}
		return out, nil
	}
}

// TestPodNetworkAsksAgainOverUDP: a query over UDP whose datagram is lost is sent again, so
// one lost packet does not make a pod unreachable.
func TestPodNetworkAsksAgainOverUDP(t *testing.T) {
	var got atomic.Int32
	addr := udpDNS(t, func(n int32, _ *dnsmessage.Message) bool {
		got.Store(n)
		return n > 1 // the first datagram is lost
	})
	c := checks.NewPodNetwork(adapt.Clientset(fake.NewClientset(podSlice(t, "b", addr, "node-b", "", corev1.ProtocolUDP))), "node-a", kubeDNS, 1,
		checks.PodProbe{DNSName: "kubernetes.default.svc.cluster.local", FullSize: fullSize(1450)})
	require.NoError(t, checks.Execute(t.Context(), c, 3*time.Second).Err)
	assert.Equal(t, int32(2), got.Load(), "the query, and once more")
}
