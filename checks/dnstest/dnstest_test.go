package dnstest_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/dns/dnsmessage"

	"github.com/nodeready/nodeready/checks"
	"github.com/nodeready/nodeready/checks/dnstest"
)

var (
	svcIP  = netip.MustParseAddr("10.96.0.1")
	svcIP6 = netip.MustParseAddr("fd00::1")
	dbIP   = netip.MustParseAddr("10.96.0.2")
)

func newServer(t *testing.T) *dnstest.Server {
	t.Helper()
	srv, err := dnstest.NewServer(map[string][]netip.Addr{
		"svc.nodeready.test": {svcIP, svcIP6},
		"DB.nodeready.test.": {dbIP},
	})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	return srv
}

func TestServer(t *testing.T) {
	tests := []struct {
		name    string
		host    string
		network string
		want    []netip.Addr
		missing bool
	}{
		{name: "A", host: "svc.nodeready.test.", network: "ip4", want: []netip.Addr{svcIP}},
		{name: "AAAA", host: "svc.nodeready.test.", network: "ip6", want: []netip.Addr{svcIP6}},
		{name: "both", host: "svc.nodeready.test.", network: "ip", want: []netip.Addr{svcIP, svcIP6}},
		{name: "name given with trailing dot, case folded", host: "db.NodeReady.test.", network: "ip", want: []netip.Addr{dbIP}},
		{name: "unknown name", host: "missing.nodeready.test.", network: "ip", missing: true},
	}
	for _, transport := range []string{"udp", "tcp after truncated udp"} {
		srv := newServer(t)
		srv.SetTruncateUDP(transport != "udp")
		r := checks.NewResolver(srv.Addr())
		for _, tt := range tests {
			t.Run(transport+"/"+tt.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
				defer cancel()

				got, err := r.LookupNetIP(ctx, tt.network, tt.host)

				if tt.missing {
					var dnsErr *net.DNSError
					require.True(t, errors.As(err, &dnsErr), "error %v", err)
					assert.True(t, dnsErr.IsNotFound, "error %v", err)
					return
				}
				require.NoError(t, err)
				assert.ElementsMatch(t, tt.want, got)
			})
		}
	}
}

func TestServerSetBroken(t *testing.T) {
	srv := newServer(t)
	r := checks.NewResolver(srv.Addr())
	lookup := func() error {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		_, err := r.LookupHost(ctx, "svc.nodeready.test.")
		return err
	}

	srv.SetBroken(true)
	err := lookup()
	var dnsErr *net.DNSError
	require.True(t, errors.As(err, &dnsErr), "error %v", err)
	assert.True(t, dnsErr.IsNotFound, "broken answers NXDOMAIN: %v", err)

	srv.SetBroken(false)
	assert.NoError(t, lookup())
}

func TestServerSetSilent(t *testing.T) {
	srv := newServer(t)
	srv.SetSilent(true)
	const timeout = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	start := time.Now()

	_, err := checks.NewResolver(srv.Addr()).LookupHost(ctx, "svc.nodeready.test.")

	var dnsErr *net.DNSError
	require.True(t, errors.As(err, &dnsErr), "error %v", err)
	assert.True(t, dnsErr.IsTimeout, "a silent server times the lookup out: %v", err)
	assert.False(t, dnsErr.IsNotFound)
	// A bound on correctness (the lookup ends with its context), not a speed goal.
	assert.Less(t, time.Since(start), timeout+time.Second)
}

func TestServerClose(t *testing.T) {
	srv := newServer(t)
	conn, err := net.Dial("tcp", srv.Addr())
	require.NoError(t, err, "tcp on the UDP port")
	defer conn.Close()

	returnsSoon(t, func() {
		srv.Close()
		srv.Close()
	}, "Close waited for an idle TCP connection")
	_, err = conn.Read(make([]byte, 1))
	assert.Error(t, err, "open connection closed")
}

// TestServerHoldOpenDelay: a held answer waits for Open, then for its delay; the server
// tells about every query as it arrives, so a test can act while a lookup waits.
func TestServerHoldOpenDelay(t *testing.T) {
	srv := newServer(t)
	const delay = 200 * time.Millisecond
	srv.SetDelay(delay)
	srv.Hold()
	n, next := srv.Queries()
	assert.Zero(t, n)

	type result struct {
		addrs []string
		at    time.Time
	}
	done := make(chan result, 1)
	go func() {
		addrs, _ := checks.NewResolver(srv.Addr()).LookupHost(t.Context(), "db.nodeready.test.")
		done <- result{addrs, time.Now()}
	}()
	select {
	case <-next:
	case <-time.After(5 * time.Second):
		t.Fatal("the query was not reported")
	}
	n, _ = srv.Queries()
	assert.Positive(t, n)
	select {
	case r := <-done:
		t.Fatalf("answered while held: %v", r.addrs)
	case <-time.After(300 * time.Millisecond):
	}

	opened := time.Now()
	srv.Open()
	r := <-done
	assert.Equal(t, []string{dbIP.String()}, r.addrs)
	assert.GreaterOrEqual(t, r.at.Sub(opened), delay, "the delay runs after Open")
}

func TestServerCloseDropsHeldAnswers(t *testing.T) {
	srv := newServer(t)
	srv.Hold()
	_, next := srv.Queries()
	go func() { _, _ = checks.NewResolver(srv.Addr()).LookupHost(t.Context(), "db.nodeready.test.") }()
	<-next
	returnsSoon(t, srv.Close, "Close waited for a held answer")
}

// returnsSoon fails the test with why unless f returns within two seconds.
func returnsSoon(t *testing.T, f func(), why string) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		f()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal(why)
	}
}

func TestNewServerInvalidAddress(t *testing.T) {
	_, err := dnstest.NewServer(map[string][]netip.Addr{"svc.nodeready.test.": {{}}})
	assert.ErrorContains(t, err, "invalid address for svc.nodeready.test.")
}

// TestServerCountsAResendOnce: the same datagram sent three times (a client resending a
// query it got no answer to) is one query; a query with another ID is another.
func TestServerCountsAResendOnce(t *testing.T) {
	srv := newServer(t)
	conn, err := net.Dial("udp", srv.Addr())
	require.NoError(t, err)
	defer conn.Close()
	query := func(id uint16) []byte {
		b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: id, RecursionDesired: true})
		require.NoError(t, b.StartQuestions())
		require.NoError(t, b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName("db.nodeready.test."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}))
		msg, err := b.Finish()
		require.NoError(t, err)
		return msg
	}
	for _, id := range []uint16{1, 1, 1, 2} {
		_, err := conn.Write(query(id))
		require.NoError(t, err)
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
		_, err = conn.Read(make([]byte, 512))
		require.NoError(t, err, "answered")
	}
	n, _ := srv.Queries()
	assert.Equal(t, int64(2), n)
}
