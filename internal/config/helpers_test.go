package config_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"sync"
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
	loaded.Store(t, loadedEnv{env: env, dryRun: dryRun})
	return configtest.Load(t, env, dryRun)
}

// loaded is the environment each test loaded last, for the refusal it asserts.
var loaded sync.Map // *testing.T -> loadedEnv

type loadedEnv struct {
	env    map[string]string
	dryRun bool
}

// refusals are the refusals the tests asserted, each with the environment that brought
// it. With $NODEREADY_REFUSALS set to a path, TestMain writes them there as JSON: the
// chart's test (e2e/static/chart TestChartRefusesWhatTheAgentRefuses) feeds each through
// helm and fails on one the chart accepts, so the chart follows the agent's refusals.
var refusals struct {
	sync.Mutex
	cases []configtest.Refusal
}

func TestMain(m *testing.M) {
	code := m.Run()
	if path := os.Getenv("NODEREADY_REFUSALS"); path != "" && code == 0 {
		data, err := json.MarshalIndent(refusals.cases, "", "  ")
		if err == nil {
			err = os.WriteFile(path, data, 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
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
	if l, ok := loaded.Load(t); ok && !l.(loadedEnv).dryRun {
		refusals.Lock()
		refusals.cases = append(refusals.cases, configtest.Refusal{Test: t.Name(), Env: l.(loadedEnv).env, Var: variable})
		refusals.Unlock()
	}
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
