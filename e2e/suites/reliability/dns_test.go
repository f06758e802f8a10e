package reliability

import (
	"net/netip"
	"testing"
	"time"

	"github.com/nodeready/nodeready/checks/dnstest"
	"github.com/nodeready/nodeready/e2e/framework"
)

// dnsIP is what the test's nameservers answer for framework.DNSName, as the fleets' do.
var dnsIP = netip.MustParseAddr("10.96.0.1")

// newSlowDNS starts a node-local nameserver for framework.DNSName whose answers take delay,
// until the test ends. A test holds and opens its answers and learns of every query
// (dnstest.Server's Hold, Open and Queries), so it can act while an agent's checks wait.
func newSlowDNS(t *testing.T, delay time.Duration) *dnstest.Server {
	t.Helper()
	s, err := dnstest.NewServer(map[string][]netip.Addr{framework.DNSName: {dnsIP}})
	if err != nil {
		t.Fatalf("dns: %v", err)
	}
	s.SetDelay(delay)
	t.Cleanup(s.Close)
	return s
}
