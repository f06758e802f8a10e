package checks_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/nodeready/nodeready/checks"
	"github.com/nodeready/nodeready/internal/envvar"
	"github.com/nodeready/nodeready/internal/kube"
	"github.com/nodeready/nodeready/internal/kube/adapt"
)

// dateServer is an API server whose clock is ahead of this node's by offset (behind
// when negative): every answer carries that Date, after delay. It records the paths
// it was asked.
type dateServer struct {
	client kube.Interface
	delay  atomic.Int64 // time.Duration
	mu     sync.Mutex
	paths  []string
}

func newDateServer(t *testing.T, offset, delay time.Duration) *dateServer {
	t.Helper()
	d := &dateServer{}
	d.delay.Store(int64(delay))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		d.paths = append(d.paths, r.URL.Path)
		d.mu.Unlock()
		time.Sleep(time.Duration(d.delay.Load()))
		w.Header().Set("Date", time.Now().Add(offset).UTC().Format(http.TimeFormat))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Node","apiVersion":"v1","metadata":{"name":"node-a"}}`))
	}))
	t.Cleanup(srv.Close)
	client, err := kube.NewForConfig(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	d.client = client
	return d
}

func (d *dateServer) asked() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.paths...)
}

// check is the clock check of the agent's client, tolerating max.
func (d *dateServer) check(max time.Duration) checks.Check {
	return checks.NewClock(d.client, kube.ClockOf(d.client), max)
}

// getNode is one of the agent's own requests, which leaves a sample.
func (d *dateServer) getNode(t *testing.T) {
	t.Helper()
	_, err := d.client.CoreV1().Nodes().Get(t.Context(), "node-a", metav1.GetOptions{})
	require.NoError(t, err)
}

// TestClock: a node whose clock is off by more than CLOCK_MAX_SKEW fails, its fault,
// with the skew and its direction; one within passes. The API server's Date is what
// a loopback server sends.
func TestClock(t *testing.T) {
	for _, tt := range []struct {
		name    string
		offset  time.Duration // the API server's clock ahead of this node's
		max     time.Duration
		wantErr []string
	}{
		{name: "the same clock", max: checks.MinClockSkew},
		{name: "within the skew", offset: 3 * time.Second, max: 5 * time.Second},
		{name: "within the skew, ahead", offset: -3 * time.Second, max: 5 * time.Second},
		{name: "behind", offset: 10 * time.Minute, max: 5 * time.Second,
			wantErr: []string{"this node's clock is at least 9m5", "behind the API server's (CLOCK_MAX_SKEW 5s)"}},
		{name: "ahead", offset: -time.Hour, max: 5 * time.Second,
			wantErr: []string{"this node's clock is at least 59m5", "ahead of the API server's (CLOCK_MAX_SKEW 5s)"}},
		{name: "just past the skew", offset: 8 * time.Second, max: 5 * time.Second,
			wantErr: []string{"behind the API server's"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := newDateServer(t, tt.offset, 0)
			srv.getNode(t)
			c := srv.check(tt.max)
			requireIdentity(t, c, "clock", "apiserver")
			res := checks.Execute(t.Context(), c, runTimeout)
			if tt.wantErr == nil {
				assert.NoError(t, res.Err)
				return
			}
			assertErrContains(t, res.Err, tt.wantErr...)
			assert.Equal(t, "fail", res.Status())
			assert.False(t, res.Unattributed(), "the node's own fault")
		})
	}
}

// TestClockCostsNoRequest: with an answer of the API server to the agent's own
// requests at hand, or one in flight, the check asks nothing of its own; only
// without either does it GET /version.
func TestClockCostsNoRequest(t *testing.T) {
	t.Run("an answer at hand", func(t *testing.T) {
		srv := newDateServer(t, 0, 0)
		srv.getNode(t)
		require.NoError(t, checks.Execute(t.Context(), srv.check(checks.MinClockSkew), runTimeout).Err)
		assert.Equal(t, []string{"/api/v1/nodes/node-a"}, srv.asked())
	})
	t.Run("an answer in flight", func(t *testing.T) {
		srv := newDateServer(t, 0, 200*time.Millisecond)
		done := make(chan struct{})
		go func() { defer close(done); srv.getNode(t) }()
		require.NoError(t, checks.Execute(t.Context(), srv.check(checks.MinClockSkew), runTimeout).Err)
		<-done
		assert.Equal(t, []string{"/api/v1/nodes/node-a"}, srv.asked())
	})
	t.Run("an answer in flight for longer than a second", func(t *testing.T) {
		// A loaded API server: the round's own requests take seconds to answer, and
		// the check waits for them rather than add one more.
		srv := newDateServer(t, 0, 1500*time.Millisecond)
		done := make(chan struct{})
		go func() { defer close(done); srv.getNode(t) }()
		require.NoError(t, checks.Execute(t.Context(), srv.check(5*time.Second), runTimeout).Err)
		<-done
		assert.Equal(t, []string{"/api/v1/nodes/node-a"}, srv.asked())
	})
	t.Run("the quickest answer speaks", func(t *testing.T) {
		// A quick answer (a refusal by API Priority and Fairness, say), then a slow
		// one that alone could not tell: the quick one bounds the offset.
		srv := newDateServer(t, 0, 0)
		srv.getNode(t)
		srv.delay.Store(int64(2500 * time.Millisecond))
		srv.getNode(t)
		require.NoError(t, checks.Execute(t.Context(), srv.check(checks.MinClockSkew), runTimeout).Err)
		assert.Equal(t, []string{"/api/v1/nodes/node-a", "/api/v1/nodes/node-a"}, srv.asked())
	})
	t.Run("no answer", func(t *testing.T) {
		srv := newDateServer(t, time.Hour, 0)
		res := checks.Execute(t.Context(), srv.check(checks.MinClockSkew), runTimeout)
		assertErrContains(t, res.Err, "behind the API server's")
		assert.Equal(t, []string{"/version"}, srv.asked())
	})
}

// TestClockThatCannotTell: an API server that takes longer to answer than the skew
// leaves the offset unbounded; a loaded API server must not hold a healthy node, so
// the check passes and its report says what it could not prove.
func TestClockThatCannotTell(t *testing.T) {
	srv := newDateServer(t, 0, 2500*time.Millisecond) // bounds at least 2.5s wide
	res := checks.Execute(t.Context(), srv.check(checks.MinClockSkew), runTimeout)
	require.NoError(t, res.Err)
	require.Len(t, res.Report.NotProven, 1)
	assert.Contains(t, res.Report.NotProven[0], "a clock within 2s of the API server's: its quickest answer took 2.5")
}

// TestClockWithoutSamples: without a client, or with one that records no Date (the
// fake clientset), the check is skipped and says why.
func TestClockWithoutSamples(t *testing.T) {
	o := checks.ClockOptions{MaxSkew: 5 * time.Second}
	for _, env := range []checks.Env{{}, {Client: adapt.Clientset(fake.NewClientset()), Node: "node-a"}} {
		res := checks.RunAll(t.Context(), o.Checks(&checks.Options{}, env), time.Second)
		require.Len(t, res, 1)
		assert.True(t, res[0].Skipped(), "%v", res[0].Err)
	}
}

// TestClockOptions: CLOCK_MAX_SKEW under 2s is refused by name: Date counts whole
// seconds.
func TestClockOptions(t *testing.T) {
	for _, d := range []time.Duration{0, time.Second, 1999 * time.Millisecond, -5 * time.Second} {
		o := checks.ClockOptions{MaxSkew: d}
		var e *envvar.Error
		require.ErrorAs(t, o.Validate(&checks.Options{}, checks.Use{Selected: true}), &e, d)
		assert.Equal(t, "CLOCK_MAX_SKEW", e.Var)
	}
	o := checks.ClockOptions{MaxSkew: 2 * time.Second}
	assert.NoError(t, o.Validate(&checks.Options{}, checks.Use{Selected: true}))
}

// TestCertificateByTheAPIServersClock: a certificate outside its validity by this
// node's clock is judged by the API server's: valid there, the fault is this node's
// clock; outside it there too, the server's or the configuration's; with no answer of
// the API server to tell, nobody's can be told. Never the configuration's on a node
// whose clock is wrong.
func TestCertificateByTheAPIServersClock(t *testing.T) {
	now := time.Now()
	for _, tt := range []struct {
		name      string
		notBefore time.Time
		offset    time.Duration // the API server's clock ahead of this node's
		noSamples bool
		want      string // "node", "misconfigured" or "unattributed"
	}{
		{name: "not yet valid here, valid by the API server's clock", notBefore: now.Add(time.Hour), offset: 90 * time.Minute, want: "node"},
		{name: "expired here, valid by the API server's clock", notBefore: now.Add(-2 * time.Hour), offset: -90 * time.Minute, want: "node"},
		{name: "expired by both clocks", notBefore: now.Add(-2 * time.Hour), want: "misconfigured"},
		{name: "not yet valid by both clocks", notBefore: now.Add(time.Hour), offset: time.Minute, want: "misconfigured"},
		{name: "no answer of the API server to tell", notBefore: now.Add(time.Hour), noSamples: true, want: "unattributed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			url, caFile := tlsServer(t, tt.notBefore, tt.notBefore.Add(time.Hour))
			client, err := checks.NewHTTPClient(caFile)
			require.NoError(t, err)
			api := newDateServer(t, tt.offset, 0)
			if !tt.noSamples {
				api.getNode(t)
			}
			c := checks.NewHTTP(url, checks.StatusMatcher{}, client).WithClock(kube.ClockOf(api.client))
			res := checks.Execute(t.Context(), c, runTimeout)
			require.Error(t, res.Err)
			assert.Contains(t, res.Err.Error(), "certificate has expired or is not yet valid")
			got := "node"
			switch {
			case res.Misconfigured():
				got = "misconfigured"
			case res.Unattributed():
				got = "unattributed"
			}
			assert.Equal(t, tt.want, got, "%v", res.Err)
			if tt.want == "node" {
				assert.Contains(t, res.Err.Error(), "this node's clock is wrong")
			}
		})
	}
}

// tlsServer serves HTTPS on loopback with a self-signed certificate valid from
// notBefore to notAfter, and returns its URL and a CA file that trusts it.
func tlsServer(t *testing.T, notBefore, notAfter time.Time) (url, caFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "nodeready test"},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes this test fails on purpose
	srv.StartTLS()
	t.Cleanup(srv.Close)
	caFile = filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	return srv.URL, caFile
}
