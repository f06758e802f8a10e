package agent

import (
	"context"
	"io"
	"maps"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/nodeready/nodeready/internal/config"
	"github.com/nodeready/nodeready/internal/config/configtest"
	"github.com/nodeready/nodeready/internal/report"
)

// The tests build the agent with New from a configuration, give it a fake clientset
// (cluster_test.go) and checks against servers on loopback (targets_test.go), and assert
// on what people see: the node, its condition, the Events, the metrics and the requests.

// loadConfig is config.Load of exactly the variables in env, as the agent's
// process would see them; the test fails if they are refused.
func loadConfig(t *testing.T, env map[string]string, dryRun bool) config.Config {
	t.Helper()
	cfg, err := configtest.Load(t, env, dryRun)
	require.NoError(t, err)
	return cfg
}

// with returns base with more variables set.
func with(base map[string]string, more ...map[string]string) map[string]string {
	env := maps.Clone(base)
	for _, m := range more {
		maps.Copy(env, m)
	}
	return env
}

// fast is the environment of the tests' agents: node-a, rounds milliseconds apart, no settle
// window.
var fast = map[string]string{"NODE_NAME": nodeName, "SETTLE_TIME": "0s", "RETRY_BACKOFF_BASE": "1ms", "RETRY_BACKOFF_MAX": "5ms"}

// A command check that passes, and one that fails.
var (
	passing = map[string]string{"CHECKS": "command", "CHECK_COMMAND": "/bin/true"}
	failing = map[string]string{"CHECKS": "command", "CHECK_COMMAND": "/bin/false"}
)

// failingNote is how the failing command check is told in Events and the condition.
const failingNote = "command /bin/false: run /bin/false: exit status 1, no output"

// newAgent is New for node-a on fast rounds with env on top, its probes on any free port
// unless env names one.
func newAgent(t *testing.T, clients Clients, env ...map[string]string) *Agent {
	t.Helper()
	vars := with(fast, env...)
	cfg := loadConfig(t, vars, false)
	if _, set := vars["METRICS_PORT"]; !set {
		cfg.MetricsPort = 0
	}
	a, err := New(cfg, zerolog.New(io.Discard), clients, BuildInfo{Version: "test", Revision: "abc"}, time.Now())
	require.NoError(t, err)
	return a
}

// running is an agent that Run runs in the background.
type running struct {
	*Agent
	ctx     context.Context
	sigterm context.CancelFunc
	done    chan struct{}
	err     error
}

// prepare readies a to run until its SIGTERM (sigterm) or the test's end; start runs it.
func prepare(t *testing.T, a *Agent) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	r := &running{Agent: a, ctx: ctx, sigterm: cancel, done: make(chan struct{})}
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *running) start() *running {
	go func() {
		r.err = r.Run(r.ctx)
		close(r.done)
	}()
	return r
}

// start runs a until the test ends.
func start(t *testing.T, a *Agent) *running { return prepare(t, a).start() }

// runNew runs the agent New builds for the cluster's node-a with env on top of fast.
func runNew(t *testing.T, c *cluster, env ...map[string]string) *running {
	t.Helper()
	return start(t, newAgent(t, Clients{Kube: c.kube()}, env...))
}

// stop sends the SIGTERM and returns what Run returned, which must be within the pod's
// termination grace period.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	return r.stopWithin(t, report.TerminationGracePeriod)
}

// abort sends the SIGTERM during the checks, which must end the agent at once; an abort is
// no failure.
func (r *running) abort(t *testing.T) {
	t.Helper()
	require.NoError(t, r.stopWithin(t, 10*time.Second), "an abort is not a failure")
}

// wait returns what Run returned once something else brought its SIGTERM, within the pod's
// termination grace period.
func (r *running) wait(t *testing.T) error {
	t.Helper()
	return r.within(t, report.TerminationGracePeriod)
}

func (r *running) stopWithin(t *testing.T, d time.Duration) error {
	t.Helper()
	r.sigterm()
	return r.within(t, d)
}

func (r *running) within(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case <-r.done:
		return r.err
	case <-time.After(d):
		t.Fatalf("Run did not return within %s", d)
		return nil
	}
}

// returned reports whether Run has returned.
func (r *running) returned() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

func isVerified(a *Agent) bool  { return testutil.ToFloat64(a.metrics.verified) == 1 }
func rounds(a *Agent) float64   { return testutil.ToFloat64(a.metrics.rounds) }
func failures(a *Agent) float64 { return testutil.ToFloat64(a.metrics.failures) }
func patchesOf(a *Agent, result string) float64 {
	return testutil.ToFloat64(a.metrics.patches.WithLabelValues(result))
}

// waitFor waits, generously for a busy machine, until cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, time.Millisecond, what)
}
