package config_test

import (
	"maps"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeready/nodeready/internal/config"
	"github.com/nodeready/nodeready/internal/config/configtest"
)

// load is Load of exactly the variables in env, as the agent's process would
// see them (configtest.Setenv).
func load(t *testing.T, env map[string]string, dryRun bool) (config.Config, error) {
	t.Helper()
	return configtest.Load(t, env, dryRun)
}

// with returns base with more variables set.
func with(base map[string]string, more map[string]string) map[string]string {
	env := maps.Clone(base)
	maps.Copy(env, more)
	return env
}

// inPod is what every agent's pod sets: its node, and the API server's service address.
var inPod = map[string]string{"NODE_NAME": "node-a", "KUBERNETES_SERVICE_HOST": "10.96.0.1"}

// defaultConfig is the configuration with every default and NODE_NAME set.
func defaultConfig(t *testing.T) config.Config {
	t.Helper()
	cfg, err := load(t, inPod, false)
	require.NoError(t, err)
	return cfg
}

// requireRefused requires err to be an *Error that names variable, and
// returns it for assertions on its text.
func requireRefused(t *testing.T, err error, variable string, msgAndArgs ...any) *config.Error {
	t.Helper()
	var ce *config.Error
	require.ErrorAs(t, err, &ce, msgAndArgs...)
	assert.Equal(t, variable, ce.Var, msgAndArgs...)
	return ce
}

// loadUnlessRefused loads env. With refused set it requires Load to refuse
// that variable and reports false; otherwise it requires Load to succeed.
func loadUnlessRefused(t *testing.T, env map[string]string, refused string) (config.Config, bool) {
	t.Helper()
	cfg, err := load(t, env, false)
	if refused != "" {
		requireRefused(t, err, refused)
		return config.Config{}, false
	}
	require.NoError(t, err)
	return cfg, true
}
