package kube_test

import (
	"context"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/nodeready/nodeready/internal/kube"
)

// TestRequestsAtStartShareOneConnection: the agent's first requests go out at once (the
// watch of its node, the checks'); over HTTP/2 they share one connection, so the API server
// completes one TLS handshake per agent, not one per request.
func TestRequestsAtStartShareOneConnection(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	srv.EnableHTTP2 = true
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	// A dial that takes a while, as over a real network: without the wait for the first
	// connection, every request of the first instant dials its own.
	dialer := &net.Dialer{}
	client, err := kube.NewForConfig(&rest.Config{
		Host:            srv.URL,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca},
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			time.Sleep(50 * time.Millisecond)
			return dialer.DialContext(ctx, network, addr)
		},
	})
	require.NoError(t, err)

	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			_, err := client.CoreV1().Nodes().Get(t.Context(), "node-a", metav1.GetOptions{})
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	_, err = client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(t.Context())
	require.NoError(t, err)
	assert.Equal(t, int32(1), conns.Load(), "connections the API server accepted")
}
