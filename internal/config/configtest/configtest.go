// Package configtest loads a configuration in tests from exactly the
// variables a test names, through the process environment as the agent reads
// it, with t.Setenv: whatever else is set where the tests run is unset for the
// test.
package configtest

import (
	"os"
	"testing"

	"github.com/nodeready/nodeready/internal/config"
)

// Others are the variables of kube-node-ready that Load reads besides its own.
var Others = []string{"CLUSTER_DNS_IP", "KLOG_VERBOSITY", "ENABLE_CONNECTIVITY_MATRIX"}

// Setenv makes env the whole of the agent's environment for the test: each of
// its variables set, every other variable the agent reads unset.
func Setenv(t testing.TB, env map[string]string) {
	t.Helper()
	for _, v := range config.Variables() {
		unset(t, v.Name)
	}
	for _, name := range Others {
		unset(t, name)
	}
	for name, value := range env {
		t.Setenv(name, value)
	}
}

// unset unsets name for the test; t.Setenv puts its value back at the end.
func unset(t testing.TB, name string) {
	t.Helper()
	t.Setenv(name, "")
	if err := os.Unsetenv(name); err != nil {
		t.Fatal(err)
	}
}

// Load is config.Load of exactly the variables in env.
func Load(t testing.TB, env map[string]string, dryRun bool) (config.Config, error) {
	t.Helper()
	Setenv(t, env)
	return config.Load(dryRun)
}

// Refusal is a refusal a test of package config asserted: the environment (on top of what
// every agent's pod sets: NODE_NAME and KUBERNETES_SERVICE_HOST) and the variable refused.
type Refusal struct {
	Test string
	Env  map[string]string
	Var  string
}
