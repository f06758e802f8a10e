package config_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeready/nodeready/internal/config"
	"github.com/nodeready/nodeready/internal/config/configtest"
)

// TestFingerprintChangesWithWhatTheChecksTest: nodes verified under other checks or
// targets prove nothing about a configuration, so its fingerprint changes with them,
// and only with them.
func TestFingerprintChangesWithWhatTheChecksTest(t *testing.T) {
	load := func(env map[string]string) string {
		t.Helper()
		base := map[string]string{"NODE_NAME": "node-a", "KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
		for k, v := range env {
			base[k] = v
		}
		configtest.Setenv(t, base)
		c, err := config.Load(false)
		require.NoError(t, err)
		return c.Fingerprint()
	}
	base := load(nil)
	assert.Regexp(t, `^[0-9a-f]{10}$`, base)
	assert.Equal(t, base, load(nil), "the same configuration")
	for _, env := range []map[string]string{
		{"DNS_TEST_DOMAINS": "kubernetes.default.svc.example.org"},
		{"CHECKS": "dns,tcp"},
		{"CHECK_TIMEOUT": "3s"},
		{"HTTP_URLS": "http://example.org/healthz"},
	} {
		assert.NotEqual(t, base, load(env), "%v changes what the checks test", env)
	}
	for _, env := range []map[string]string{
		{"FAILURE_ACTION": "replace-node"},
		{"LOG_LEVEL": "debug"},
		{"MAX_RETRIES": "9"},
		{"DNS_NAMESERVER": "10.0.0.7:53"}, // the node's own cache, as every node has one
	} {
		assert.Equal(t, base, load(env), "%v does not change what the checks test", env)
	}
}
