package wiring

import (
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
)

// TestInClusterConfigWithCAFromEnv: with the token file and the CA bundle from the
// environment, the agent's client trusts the API server and sends the token; without the
// Service's address or with a CA that is no certificate, it says what is wrong.
func TestInClusterConfigWithCAFromEnv(t *testing.T) {
	var gotAuth string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth = r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"36","gitVersion":"v1.36.3"}`))
	}))
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	host, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	require.NoError(t, err)
	token := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(token, []byte("the-token"), 0o600))

	t.Run("reaches the API server", func(t *testing.T) {
		t.Setenv("KUBERNETES_SERVICE_HOST", host)
		t.Setenv("KUBERNETES_SERVICE_PORT", port)
		cfg, err := inClusterConfig(token, ca)
		require.NoError(t, err)
		assert.Equal(t, token, cfg.BearerTokenFile, "client-go re-reads a rotated token from the file")
		client, err := kubernetes.NewForConfig(cfg)
		require.NoError(t, err)
		v, err := client.Discovery().ServerVersion()
		require.NoError(t, err)
		assert.Equal(t, "v1.36.3", v.GitVersion)
		assert.Equal(t, "Bearer the-token", gotAuth)
	})
	t.Run("another CA is refused", func(t *testing.T) {
		t.Setenv("KUBERNETES_SERVICE_HOST", host)
		t.Setenv("KUBERNETES_SERVICE_PORT", port)
		other, _, err := certutil.GenerateSelfSignedCertKey("other-ca", nil, nil)
		require.NoError(t, err)
		cfg, err := inClusterConfig(token, other)
		require.NoError(t, err)
		client, err := kubernetes.NewForConfig(cfg)
		require.NoError(t, err)
		_, err = client.Discovery().ServerVersion()
		assert.ErrorContains(t, err, "certificate signed by unknown authority")
	})
	t.Run("no Service address", func(t *testing.T) {
		t.Setenv("KUBERNETES_SERVICE_HOST", "")
		_, err := inClusterConfig(token, ca)
		assert.ErrorContains(t, err, "KUBERNETES_SERVICE_HOST")
	})
	t.Run("not a certificate", func(t *testing.T) {
		t.Setenv("KUBERNETES_SERVICE_HOST", host)
		t.Setenv("KUBERNETES_SERVICE_PORT", port)
		_, err := inClusterConfig(token, []byte("not a certificate"))
		assert.ErrorContains(t, err, CAEnv)
	})
	t.Run("no token", func(t *testing.T) {
		t.Setenv("KUBERNETES_SERVICE_HOST", host)
		t.Setenv("KUBERNETES_SERVICE_PORT", port)
		_, err := inClusterConfig(filepath.Join(t.TempDir(), "missing"), ca)
		assert.ErrorContains(t, err, "missing")
	})
}

// TestKubeconfigComesFirst: KUBECONFIG wins over the CA variable, as the e2e harness and
// a developer's shell set it.
func TestKubeconfigComesFirst(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "config")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://kubeconfig.example:6443", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600))
	t.Setenv("KUBECONFIG", kubeconfig)
	t.Setenv(CAEnv, "not a certificate")
	cfg, err := RestConfig(false)
	require.NoError(t, err)
	assert.Equal(t, "https://kubeconfig.example:6443", cfg.Host)
}
