package checks_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeready/nodeready/checks"
	"github.com/nodeready/nodeready/checks/dnstest"
)

// startDNS serves svc.nodeready.test on loopback until the test ends. With truncateUDP,
// every UDP answer is truncated, so the resolver must ask again over TCP.
func startDNS(t *testing.T, truncateUDP bool) *dnstest.Server {
	t.Helper()
	srv, err := dnstest.NewServer(map[string][]netip.Addr{
		"svc.nodeready.test.": {netip.MustParseAddr("10.96.0.1")},
	})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	srv.SetTruncateUDP(truncateUDP)
	return srv
}

func TestDNS(t *testing.T) {
	udp := checks.NewResolver(startDNS(t, false).Addr())
	tcp := checks.NewResolver(startDNS(t, true).Addr())

	tests := []struct {
		name     string
		host     string
		resolver *net.Resolver
		wantErr  []string
	}{
		{name: "A record", host: "svc.nodeready.test", resolver: udp},
		{name: "trailing dot is fully qualified", host: "svc.nodeready.test.", resolver: udp},
		{name: "upper case matches", host: "SVC.NodeReady.TEST", resolver: udp},
		// An address is its own answer, as it was in kube-node-ready: no query is sent.
		{name: "IPv4 address", host: "10.96.0.10", resolver: udp},
		{name: "IPv6 address", host: "fd00::10", resolver: udp},
		{name: "truncated UDP answer retried over TCP", host: "svc.nodeready.test.", resolver: tcp},
		{name: "NXDOMAIN", host: "missing.nodeready.test", resolver: udp, wantErr: []string{`resolve "missing.nodeready.test": lookup missing.nodeready.test`, "no such host"}},
		{name: "NXDOMAIN over TCP", host: "missing.nodeready.test.", resolver: tcp, wantErr: []string{`resolve "missing.nodeready.test.": lookup missing.nodeready.test.`, "no such host"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := checks.NewDNS(tt.host, tt.resolver)
			requireIdentity(t, c, "dns", tt.host)

			res := checks.Execute(t.Context(), c, runTimeout)

			assertErrContains(t, res.Err, tt.wantErr...)
			if tt.wantErr == nil {
				return
			}
			var dnsErr *net.DNSError
			require.True(t, errors.As(res.Err, &dnsErr))
			assert.True(t, dnsErr.IsNotFound)
		})
	}
}

func TestDNSServerNeverAnswers(t *testing.T) {
	srv := startDNS(t, false)
	srv.SetSilent(true)
	c := checks.NewDNS("svc.nodeready.test.", checks.NewResolver(srv.Addr()))
	const timeout = 300 * time.Millisecond

	res := checks.Execute(t.Context(), c, timeout)

	require.Error(t, res.Err)
	assert.Contains(t, res.Err.Error(), `resolve "svc.nodeready.test."`)
	assert.Contains(t, res.Err.Error(), "timed out after 300ms")
	// A bound on correctness (the check ends with its context), not a speed goal.
	assert.Less(t, res.Duration, timeout+time.Second)
}

// TestNewResolverDefault: without DNS_NAMESERVER the resolver dials the server resolv.conf
// names, which it is given.
func TestNewResolverDefault(t *testing.T) {
	srv := dnsPod(t)
	r := checks.NewResolver("")
	require.True(t, r.PreferGo)
	conn, err := r.Dial(t.Context(), "udp", srv.Addr())
	require.NoError(t, err)
	defer conn.Close()
	assert.Equal(t, srv.Addr(), conn.RemoteAddr().String())
}

// TestDNSResendsLessOftenTheLongerItWaits: a nameserver that reads every query and answers
// none (an overloaded one, every new node of a burst asking at once) gets a query again after
// 0.5 s, then after 1 s more: three copies of each question in the check's 3 s, not one every
// half second (seven).
func TestDNSResendsLessOftenTheLongerItWaits(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	defer pc.Close()
	var datagrams atomic.Int32
	go func() {
		buf := make([]byte, 1500)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
			datagrams.Add(1)
		}
	}()
	r := checks.NewResolverWith(func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, pc.LocalAddr().String())
	})
	res := checks.Execute(t.Context(), checks.NewDNS("kubernetes.default.svc.cluster.local.", r), 3*time.Second)
	require.Error(t, res.Err, "no answer")
	got := datagrams.Load()
	assert.GreaterOrEqual(t, got, int32(4), "each question asked, then asked again")
	assert.LessOrEqual(t, got, int32(8), "A and AAAA, at most four copies each")
}

// TestDNSAsksAgainWhenABackendIsSilent: the cluster DNS Service with a backend that never
// answers (a CoreDNS pod on a node whose pod network broke, Ready all the same), which
// kube-proxy picks for some sockets: every query that gets no answer in half a second is
// sent again from a new socket, which reaches a backend that answers, and the check passes.
// A name under the search list asks several questions, each of which lands on the silent
// backend first here.
func TestDNSAsksAgainWhenABackendIsSilent(t *testing.T) {
	silent, working := dnsPod(t), dnsPod(t)
	silent.SetSilent(true)
	var sockets atomic.Int32
	pick := func(ctx context.Context, network, _ string) (net.Conn, error) {
		backend := working.Addr() // kube-proxy's pick for a new socket: the silent backend every other time
		if sockets.Add(1)%2 == 1 {
			backend = silent.Addr()
		}
		var d net.Dialer
		return d.DialContext(ctx, network, backend)
	}
	r := checks.NewResolverWith(pick)
	res := checks.Execute(t.Context(), checks.NewDNS("kubernetes.default.svc.cluster.local.", r), 5*time.Second)
	require.NoError(t, res.Err)
	q, _ := working.Queries()
	assert.Positive(t, q)
	s, _ := silent.Queries()
	assert.Positive(t, s, "the silent backend was asked first")

	// No backend answers: a failure, within the check's timeout.
	working.SetSilent(true)
	res = checks.Execute(t.Context(), checks.NewDNS("kubernetes.default.svc.cluster.local.", r), 2*time.Second)
	require.Error(t, res.Err)
	assert.Contains(t, res.Err.Error(), "timed out after 2s")
}
