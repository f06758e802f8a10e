package wiring

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// TestClientsDoNotThrottleTheAgent: a burst of the agent's requests within one write's
// deadline is sent, not refused by the agent's own rate limiter. With client-go's default
// (5 a second in bursts of 10) the 40 requests below need 6 s of tokens, and every one
// past the burst fails at once with "client rate limiter Wait returned an error".
func TestClientsDoNotThrottleTheAgent(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"node-a"}}`))
	}))
	t.Cleanup(srv.Close)
	clients, err := NewClients(&rest.Config{Host: srv.URL})
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	var failed []error
	for range 40 {
		if _, err := clients.Kube.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{}); err != nil {
			failed = append(failed, err)
		}
	}
	assert.Empty(t, failed)
}
