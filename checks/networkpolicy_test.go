package checks_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodeready/nodeready/checks"
	"github.com/nodeready/nodeready/internal/envvar"
	"github.com/nodeready/nodeready/internal/kube/adapt"
)

var canaryName = types.NamespacedName{Namespace: "kube-system", Name: "nodeready-canary"}

// canaryPolicy is the policy of manifests/networkpolicy/canary.yaml: every pod,
// and every other address on every port but TCP 10250.
func canaryPolicy() *networkingv1.NetworkPolicy {
	tcp, udp, sctp := corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP
	port := func(n int) *intstr.IntOrString { p := intstr.FromInt32(int32(n)); return &p }
	end := func(n int32) *int32 { return &n }
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: canaryName.Namespace, Name: canaryName.Name},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "nodeready"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{
				{To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}}},
				{
					To: []networkingv1.NetworkPolicyPeer{
						{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0"}},
						{IPBlock: &networkingv1.IPBlock{CIDR: "::/0"}},
					},
					Ports: []networkingv1.NetworkPolicyPort{
						{Protocol: &tcp, Port: port(1), EndPort: end(10249)},
						{Protocol: &tcp, Port: port(10251), EndPort: end(65535)},
						{Protocol: &udp},
						{Protocol: &sctp},
					},
				},
			},
		},
	}
}

// kubeletNode is a node whose kubelet serves at ip:port.
func kubeletNode(ip string, port int) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Status: corev1.NodeStatus{
			Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(port)}},
		},
	}
}

// acceptCounting is a TCP server on loopback that accepts and counts connections.
func acceptCounting(t *testing.T) (addr string, accepted *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	accepted = &atomic.Int32{}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			_ = c.Close()
		}
	}()
	return l.Addr().String(), accepted
}

// closedPort is a loopback port nothing listens on: a rejected connection.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	n, err := strconv.Atoi(p)
	require.NoError(t, err)
	return n
}

// policyForPort is the canary blocking port instead of 10250, as a cluster whose
// kubelets serve there would have it.
func policyForPort(port int) *networkingv1.NetworkPolicy {
	p := canaryPolicy()
	ports := p.Spec.Egress[1].Ports
	below, above := int32(port-1), int32(port+1)
	ports[0].EndPort = &below
	from := intstr.FromInt32(above)
	ports[1].Port = &from
	return p
}

func TestNetworkPolicy(t *testing.T) {
	apiServer, _ := acceptCounting(t)
	open, kubeletAccepted := acceptCounting(t)
	refused := closedPort(t)
	passed := func(ok bool, err error) func(context.Context) (bool, error) {
		return func(context.Context) (bool, error) { return ok, err }
	}
	for _, tc := range []struct {
		name      string
		objects   []runtime.Object
		apiServer string
		fleet     func(context.Context) (bool, error)
		// want: "" for a pass; else whose fault.
		want string
		msg  string
	}{
		{
			name:    "rejected: enforced",
			objects: []runtime.Object{policyForPort(refused), kubeletNode("127.0.0.1", refused)},
			fleet:   passed(true, nil),
		},
		{
			name:    "opened while another node passed: this node's fault",
			objects: []runtime.Object{policyForPort(portOf(t, open)), kubeletNode("127.0.0.1", portOf(t, open))},
			fleet:   passed(true, nil),
			want:    "node", msg: "NetworkPolicy not in force on this node",
		},
		{
			name:    "opened and no node passed: no engine, misconfigured",
			objects: []runtime.Object{policyForPort(portOf(t, open)), kubeletNode("127.0.0.1", portOf(t, open))},
			fleet:   passed(false, nil),
			want:    "misconfigured", msg: "no node of this configuration passed",
		},
		{
			name:    "opened and the fleet unreadable: nobody's to tell",
			objects: []runtime.Object{policyForPort(portOf(t, open)), kubeletNode("127.0.0.1", portOf(t, open))},
			fleet:   passed(false, errors.New("forbidden")),
			want:    "unattributed", msg: "could not read whether another node enforces it",
		},
		{
			name:    "canary policy missing",
			objects: []runtime.Object{kubeletNode("127.0.0.1", refused)},
			want:    "misconfigured", msg: "canary NetworkPolicy kube-system/nodeready-canary not found",
		},
		{
			name: "canary policy without Egress",
			objects: []runtime.Object{func() runtime.Object {
				p := policyForPort(refused)
				p.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
				return p
			}(), kubeletNode("127.0.0.1", refused)},
			want: "misconfigured", msg: "no Egress",
		},
		{
			name:    "canary policy allows the kubelet's port (a kubelet on another port)",
			objects: []runtime.Object{canaryPolicy(), kubeletNode("127.0.0.1", refused)},
			want:    "misconfigured", msg: "it allows TCP to the kubelet",
		},
		{
			name:      "canary policy blocks the API server",
			objects:   []runtime.Object{policyForPort(refused), kubeletNode("127.0.0.1", refused)},
			apiServer: "127.0.0.1:" + strconv.Itoa(refused),
			want:      "misconfigured", msg: "it blocks TCP to the API server",
		},
		{
			name:    "node without InternalIP",
			objects: []runtime.Object{policyForPort(refused), kubeletNode("", refused)},
			want:    "misconfigured", msg: "lists no InternalIP",
		},
		{
			name:      "allowed connection fails: a dead network is no enforcement",
			objects:   []runtime.Object{policyForPort(refused), kubeletNode("127.0.0.1", refused)},
			apiServer: "127.0.0.1:1",
			want:      "node", msg: "connect to the API server",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server := apiServer
			if tc.apiServer != "" {
				server = tc.apiServer
			}
			if tc.name == "canary policy blocks the API server" {
				// The policy blocks the API server's port: the canary refused elsewhere.
				tc.objects[0] = policyForPort(portOf(t, server))
			}
			client := adapt.Clientset(fake.NewClientset(tc.objects...))
			c := checks.NewNetworkPolicyProgramming(checks.NewNetworkPolicy(client, "n1", canaryName, checks.APIServerEndpoint{Addr: server}, tc.fleet), 100*time.Millisecond)
			err := c.Run(t.Context())
			switch tc.want {
			case "":
				assert.NoError(t, err)
				return
			case "misconfigured":
				assert.ErrorIs(t, err, checks.ErrMisconfigured)
			case "unattributed":
				assert.ErrorIs(t, err, checks.ErrUnattributed)
			case "node":
				require.Error(t, err)
				assert.NotErrorIs(t, err, checks.ErrMisconfigured)
				assert.NotErrorIs(t, err, checks.ErrUnattributed)
			}
			assert.ErrorContains(t, err, tc.msg)
		})
	}
	assert.Positive(t, kubeletAccepted.Load(), "the not-enforced cases reached the kubelet")
}

// An engine programs a new pod's rules moments after the pod starts: a connection
// that opens at first and is refused once the rules are in passes the check in the
// same run, rather than failing the round. One that keeps opening for the whole
// wait is the node's fault, after more than one try.
func TestNetworkPolicyWaitsForThePodsRules(t *testing.T) {
	apiServer, _ := acceptCounting(t)
	t.Run("the rules come in: passes", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		port := l.Addr().(*net.TCPAddr).Port
		var accepted atomic.Int32
		go func() {
			// Two connections open, then the port refuses, as once the engine's reject is in.
			for accepted.Load() < 2 {
				c, err := l.Accept()
				if err != nil {
					return
				}
				accepted.Add(1)
				_ = c.Close()
			}
			_ = l.Close()
		}()
		t.Cleanup(func() { _ = l.Close() })
		client := adapt.Clientset(fake.NewClientset(policyForPort(port), kubeletNode("127.0.0.1", port)))
		c := checks.NewNetworkPolicy(client, "n1", canaryName, checks.APIServerEndpoint{Addr: apiServer}, func(context.Context) (bool, error) { return true, nil })
		require.NoError(t, c.Run(t.Context()))
		assert.Equal(t, int32(2), accepted.Load(), "the check saw the kubelet's port open twice before the block")
	})
	t.Run("the rules never come: the node's fault", func(t *testing.T) {
		open, accepted := acceptCounting(t)
		port := portOf(t, open)
		client := adapt.Clientset(fake.NewClientset(policyForPort(port), kubeletNode("127.0.0.1", port)))
		c := checks.NewNetworkPolicyProgramming(checks.NewNetworkPolicy(client, "n1", canaryName, checks.APIServerEndpoint{Addr: apiServer},
			func(context.Context) (bool, error) { return true, nil }), time.Second)
		err := c.Run(t.Context())
		require.ErrorContains(t, err, "NetworkPolicy not in force on this node")
		assert.NotErrorIs(t, err, checks.ErrMisconfigured)
		assert.Greater(t, accepted.Load(), int32(1), "tried again within the wait")
	})
}

// A drop (no answer) counts as blocked after the wait, as a reject does at once:
// a documentation address (192.0.2.1, RFC 5737) that no host answers stands in
// for the kubelet behind an engine that drops.
func TestNetworkPolicyDropIsBlocked(t *testing.T) {
	apiServer, _ := acceptCounting(t)
	client := adapt.Clientset(fake.NewClientset(policyForPort(10250), kubeletNode("192.0.2.1", 10250)))
	c := checks.NewNetworkPolicyWaiting(checks.NewNetworkPolicy(client, "n1", canaryName, checks.APIServerEndpoint{Addr: apiServer}, nil), 300*time.Millisecond)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	start := time.Now()
	assert.NoError(t, c.Run(ctx))
	assert.Less(t, time.Since(start), 5*time.Second, "a drop waits for the block's wait, not the check's timeout")
}

// The check reads only the canary policy and its own node on the success path.
func TestNetworkPolicyReads(t *testing.T) {
	apiServer, _ := acceptCounting(t)
	refused := closedPort(t)
	cs := fake.NewClientset(policyForPort(refused), kubeletNode("127.0.0.1", refused))
	fleetRead := false
	c := checks.NewNetworkPolicy(adapt.Clientset(cs), "n1", canaryName, checks.APIServerEndpoint{Addr: apiServer},
		func(context.Context) (bool, error) { fleetRead = true; return true, nil })
	require.NoError(t, c.Run(t.Context()))
	var got []string
	for _, a := range cs.Actions() {
		got = append(got, a.GetVerb()+" "+a.GetResource().Resource)
	}
	assert.Equal(t, []string{"get networkpolicies", "get nodes"}, got)
	assert.False(t, fleetRead, "the fleet is read only when the check fails")
}

func TestNetworkPolicyOptions(t *testing.T) {
	for _, bad := range []string{"a/b/c", "Kube-System/canary", "/x", "ns/"} {
		o := checks.NetworkPolicyOptions{Canary: bad}
		err := o.Validate(&checks.Options{}, checks.Use{Selected: true})
		var e *envvar.Error
		require.ErrorAs(t, err, &e, bad)
		assert.Equal(t, "NETWORKPOLICY_CANARY", e.Var)
		assert.Contains(t, e.Accepted, "NetworkPolicy")
	}
	o := checks.NetworkPolicyOptions{Canary: "canary"}
	require.NoError(t, o.Validate(&checks.Options{}, checks.Use{}))
	assert.Equal(t, types.NamespacedName{Namespace: "kube-system", Name: "canary"}, o.Target)

	// Without the API server's address (--dry-run) the check says why it does not run.
	list := o.Checks(&checks.Options{}, checks.Env{Client: adapt.Clientset(fake.NewClientset()), Node: "n1"})
	require.Len(t, list, 1)
	assert.ErrorIs(t, list[0].Run(t.Context()), checks.ErrSkipped)
}

// The allowed connection reaches the API server as the agent's client does: over
// TLS it completes the handshake before it closes. A connection closed before its
// handshake is an error to a Go TLS server, which the kube-apiserver counts in
// apiserver_tls_handshake_errors_total: one per node and round, in a series
// clusters alert on. The plain connection first shows the server logging one.
func TestNetworkPolicyCompletesTheAPIServersHandshake(t *testing.T) {
	var mu sync.Mutex
	var logged bytes.Buffer
	var closed atomic.Int32
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.Config.ErrorLog = log.New(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logged.Write(p)
	}), "", 0)
	// The server logs a connection's handshake error before it closes it: once
	// every connection is closed, every error it had is logged.
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateClosed {
			closed.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	handshakeErrors := func() int {
		mu.Lock()
		defer mu.Unlock()
		return strings.Count(logged.String(), "TLS handshake error")
	}
	allClosed := func(n int32) {
		t.Helper()
		require.Eventually(t, func() bool { return closed.Load() == n }, 10*time.Second, 10*time.Millisecond,
			"the server closed %d connections", n)
	}
	addr := srv.Listener.Addr().String()
	refused := closedPort(t)
	run := func(api checks.APIServerEndpoint) error {
		client := adapt.Clientset(fake.NewClientset(policyForPort(refused), kubeletNode("127.0.0.1", refused)))
		return checks.NewNetworkPolicy(client, "n1", canaryName, api, nil).Run(t.Context())
	}

	require.NoError(t, run(checks.APIServerEndpoint{Addr: addr}), "a plain TCP connection")
	allClosed(1)
	require.Equal(t, 1, handshakeErrors(), "a connection closed before its handshake is a handshake error to the server")

	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	require.NoError(t, run(checks.APIServerEndpoint{Addr: addr, TLS: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}))
	require.NoError(t, run(checks.APIServerEndpoint{Addr: addr, TLS: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}))
	allClosed(3)
	assert.Equal(t, 1, handshakeErrors(), "the handshakes left no error: %s", logged.String())

	err := run(checks.APIServerEndpoint{Addr: addr, TLS: &tls.Config{RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS12}})
	require.ErrorContains(t, err, "TLS handshake", "a server the client's CA does not trust is not the API server")
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
