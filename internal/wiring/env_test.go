package wiring

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/nodeready/nodeready/internal/config"
)

// TestCAEnvIsKnown: the variable of the API server's CA, which the DaemonSet sets, is
// one nodeready reads, never warned about as a lookalike.
func TestCAEnvIsKnown(t *testing.T) {
	assert.Empty(t, config.Unknown([]string{CAEnv + "=pem", "KUBECONFIG=/k", "KUBERNETES_SERVICE_HOST=10.96.0.1", "KUBERNETES_SERVICE_PORT=443"}))
}
