package agent

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeready/nodeready/checks/dnstest"
)

// dnsServer is a nameserver on loopback for a dns check of ok.test., which the test can
// break (NXDOMAIN), hold or silence, and that check's configuration, without the cluster
// DNS Service (no excuse while it is down).
func dnsServer(t *testing.T) (*dnstest.Server, map[string]string) {
	t.Helper()
	srv, err := dnstest.NewServer(map[string][]netip.Addr{"ok.test": {netip.MustParseAddr("192.0.2.1")}})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	return srv, map[string]string{"DNS_TEST_DOMAINS": "ok.test.", "DNS_NAMESERVER": srv.Addr(), "CLUSTER_DNS_SERVICE": ""}
}

// httpServer is a server on loopback for an http check, which answers 500 while broken is
// set; the map is that check's configuration.
func httpServer(t *testing.T) (*atomic.Bool, map[string]string) {
	t.Helper()
	broken := &atomic.Bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if broken.Load() {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	t.Cleanup(srv.Close)
	return broken, map[string]string{"HTTP_URLS": srv.URL}
}

// freePort returns a port that was free a moment ago, for METRICS_PORT.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}
