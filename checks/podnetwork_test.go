package checks_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodeready/nodeready/checks"
	"github.com/nodeready/nodeready/checks/dnstest"
)

// podSlice is an EndpointSlice of kube-system/kube-dns with one endpoint, the pod at addr
// (host:port) on node in zone, its port named like CoreDNS's.
func podSlice(t *testing.T, name, addr, node, zone string, protocol corev1.Protocol) *discoveryv1.EndpointSlice {
	t.Helper()
	host, p, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	port, err := strconv.Atoi(p)
	require.NoError(t, err)
	ep := endpoint(host, new(true))
	ep.NodeName = new(node)
	if zone != "" {
		ep.Zone = new(zone)
	}
	portName := map[corev1.Protocol]string{corev1.ProtocolUDP: "dns", corev1.ProtocolTCP: "dns-tcp"}[protocol]
	s := endpointSlice(name, "kube-dns", []discoveryv1.EndpointPort{{Name: new(portName), Port: new(int32(port)), Protocol: new(protocol)}}, ep)
	s.Namespace = "kube-system"
	if netip.MustParseAddr(host).Is6() {
		s.AddressType = discoveryv1.AddressTypeIPv6
	}
	return s
}

func dnsPod(t *testing.T) *dnstest.Server {
	t.Helper()
	s, err := dnstest.NewServer(map[string][]netip.Addr{"kubernetes.default.svc.cluster.local": {netip.MustParseAddr("10.96.0.1")}})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

func queried(s *dnstest.Server) int64 { n, _ := s.Queries(); return n }

// TestPodNetworkReachesPodsOnOtherNodes: the check asks a DNS query of one CoreDNS pod on
// each of up to N other nodes, taken in turn from each zone, never its own node's pod; it
// names the pods it reached.
func TestPodNetworkReachesPodsOnOtherNodes(t *testing.T) {
	own, a1, a2, b1 := dnsPod(t), dnsPod(t), dnsPod(t), dnsPod(t)
	client := fake.NewClientset(
		podSlice(t, "own", own.Addr(), "node-self", "zone-a", corev1.ProtocolUDP),
		podSlice(t, "a1", a1.Addr(), "node-a1", "zone-a", corev1.ProtocolUDP),
		podSlice(t, "a2", a2.Addr(), "node-a2", "zone-a", corev1.ProtocolUDP),
		podSlice(t, "b1", b1.Addr(), "node-b1", "zone-b", corev1.ProtocolUDP),
	)
	c := checks.NewPodNetwork(client, "node-self", "kube-system", "kube-dns", 2, checks.PodProbe{DNSName: "kubernetes.default.svc.cluster.local",
		LocalAddrs: podAddrs("10.244.0.5/24")})
	requireIdentity(t, c, "podnetwork", "pods of kube-system/kube-dns on up to 2 other nodes")

	res := checks.Execute(t.Context(), c, 5*time.Second)
	require.NoError(t, res.Err)
	assert.Equal(t, []string{"127.0.0.1 on node-a1", "127.0.0.1 on node-b1"}, c.Reached(), "one node of each zone")
	assert.Positive(t, queried(a1))
	assert.Positive(t, queried(b1))
	assert.Zero(t, queried(a2), "a third node with N=2")
	assert.Zero(t, queried(own), "its own node's pod")
}

// TestPodNetworkNamesUnreachablePods: a pod that does not answer fails the check, which
// names its IP and node; an NXDOMAIN answer is an answer (the path works).
func TestPodNetworkNamesUnreachablePods(t *testing.T) {
	silent, other := dnsPod(t), dnsPod(t)
	silent.SetSilent(true)
	client := fake.NewClientset(
		podSlice(t, "silent", silent.Addr(), "node-b", "", corev1.ProtocolUDP),
		podSlice(t, "other", other.Addr(), "node-c", "", corev1.ProtocolUDP),
	)
	c := checks.NewPodNetwork(client, "node-a", "kube-system", "kube-dns", 3, checks.PodProbe{DNSName: "no-such-name.cluster.local"})
	res := checks.Execute(t.Context(), c, time.Second)
	require.Error(t, res.Err)
	assert.Equal(t, "fail", res.Status())
	assert.Contains(t, res.Err.Error(), "cannot reach 1 of 2 pods of kube-system/kube-dns on other nodes: 127.0.0.1 on node-b: ")
	assert.NotContains(t, res.Err.Error(), "node-c", "the pod that answered NXDOMAIN")
	// The pod is the server asked, not the agent's resolv.conf's (a real node's cluster DNS).
	assert.Contains(t, res.Err.Error(), "on "+silent.Addr()+":", "the server named in the lookup error")
}

// TestPodNetworkNotCheckableAlone: with no ready endpoint on another node (the first node,
// a one-node cluster), the check cannot be checked: a skip, never a failure that holds the
// node for good. A not-ready endpoint elsewhere does not count.
func TestPodNetworkNotCheckableAlone(t *testing.T) {
	own := dnsPod(t)
	notReady := podSlice(t, "b", "127.0.0.1:53", "node-b", "", corev1.ProtocolUDP)
	notReady.Endpoints[0].Conditions.Ready = new(false)
	for name, objects := range map[string][]runtime.Object{
		"no slices":           nil,
		"only its own pod":    {podSlice(t, "own", own.Addr(), "node-a", "", corev1.ProtocolUDP)},
		"not ready elsewhere": {notReady},
	} {
		t.Run(name, func(t *testing.T) {
			c := checks.NewPodNetwork(fake.NewClientset(objects...), "node-a", "kube-system", "kube-dns", 3, checks.PodProbe{DNSName: "kubernetes.default.svc.cluster.local"})
			res := checks.Execute(t.Context(), c, time.Second)
			assert.ErrorIs(t, res.Err, checks.ErrNoPodsElsewhere)
			assert.True(t, res.Skipped())
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

	tcp := checks.NewPodNetwork(client, "node-a", "kube-system", "kube-dns", 3, checks.PodProbe{})
	require.NoError(t, checks.Execute(t.Context(), tcp, time.Second).Err)
	assert.Empty(t, paths, "a TCP connection only")

	web := checks.NewPodNetwork(client, "node-a", "kube-system", "kube-dns", 3, checks.PodProbe{HTTPPath: "/healthz", Port: "dns-tcp"})
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
	c := checks.NewPodNetwork(client, "node-a", "kube-system", "kube-dns", 1, checks.PodProbe{LocalAddrs: podAddrs("10.244.0.5/24", "fd00:10:244::5/64")})
	require.NoError(t, checks.Execute(t.Context(), c, time.Second).Err)
	assert.Equal(t, []string{"127.0.0.1 on node-b", "::1 on node-b"}, c.Reached())
}

// TestPodNetworkSaysWhichFamilyWasNotChecked: on a dual-stack pod, a Service whose
// EndpointSlices list only IPv4 (a single-stack kube-dns on a dual-stack cluster) passes on
// its IPv4 pods, and the pass says IPv6 was not checked; an IPv4-only pod, or link-local and
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
			[]string{"127.0.0.1 on node-b", "IPv6 not checked: kube-system/kube-dns lists no IPv6 address of a pod on another node, and this pod has one"}},
		{[]string{"10.244.0.5/24", "fe80::1/64", "::1/128"}, []string{"127.0.0.1 on node-b"}},
	} {
		c := checks.NewPodNetwork(client, "node-a", "kube-system", "kube-dns", 1, checks.PodProbe{LocalAddrs: podAddrs(tt.addrs...)})
		require.NoError(t, checks.Execute(t.Context(), c, time.Second).Err)
		assert.Equal(t, tt.want, c.Reached(), "pod addresses %v", tt.addrs)
	}
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
