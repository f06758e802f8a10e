package wiring

import (
	"crypto/tls"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
)

// The networkpolicy check reaches the API server where the client does, and with
// the client's TLS: the address gets its scheme's port, and the handshake trusts
// the kubeconfig's CA and checks the server's name.
func TestAPIServerEndpoint(t *testing.T) {
	for host, want := range map[string]string{
		"https://10.96.0.1":      "10.96.0.1:443",
		"https://10.96.0.1:6443": "10.96.0.1:6443",
		"10.96.0.1:6443":         "10.96.0.1:6443",
		"https://[fd00::1]":      "[fd00::1]:443",
		"http://127.0.0.1":       "127.0.0.1:80",
	} {
		api, err := apiServer(&rest.Config{Host: host})
		require.NoError(t, err, host)
		assert.Equal(t, want, api.Addr, host)
		assert.Equal(t, host != "http://127.0.0.1", api.TLS != nil, "TLS for %s", host)
	}

	srv := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	api, err := apiServer(&rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca}})
	require.NoError(t, err)
	conn, err := net.Dial("tcp", api.Addr)
	require.NoError(t, err)
	defer conn.Close()
	cfg := api.TLS.Clone()
	cfg.ServerName = "127.0.0.1"
	require.NoError(t, tls.Client(conn, cfg).Handshake(), "the kubeconfig's CA is trusted")

	conn2, err := net.Dial("tcp", api.Addr)
	require.NoError(t, err)
	defer conn2.Close()
	cfg.ServerName = "kubernetes.default.svc"
	assert.Error(t, tls.Client(conn2, cfg).Handshake(), "a name the certificate does not hold is refused")
}
