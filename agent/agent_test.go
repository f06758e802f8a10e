package agent

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/events"

	"github.com/nodeready/nodeready/checks"
	"github.com/nodeready/nodeready/config"
	"github.com/nodeready/nodeready/nodepatch"
	"github.com/nodeready/nodeready/report"
)

// fakeCheck passes or fails as its switch says, and can block until its
// context ends.
type fakeCheck struct {
	name  string
	fail  atomic.Bool
	block bool
	runs  atomic.Int32
}

func (c *fakeCheck) Name() string   { return c.name }
func (c *fakeCheck) Target() string { return "target-" + c.name }
func (c *fakeCheck) Run(ctx context.Context) error {
	c.runs.Add(1)
	if c.block {
		<-ctx.Done()
		return ctx.Err()
	}
	if c.fail.Load() {
		return errors.New("broken")
	}
	return nil
}

// fakeNode records what the agent writes and fails releases while err is set.
type fakeNode struct {
	onRelease  func() // runs inside Release, as a SIGTERM arriving during the write
	settleErr  error
	mu         sync.Mutex
	err        error
	calls      int
	condFails  int // how many condition writes fail before they work again
	conditions []nodepatch.Condition
	taints     int
	replaces   int
	notHeld    bool  // the node had no startup taint when the agent started
	replaceErr error // what Replace answers
	landed     bool  // what Confirm answers: a write that got no answer landed
	confirms   int
	failOpens  int
}

func (n *fakeNode) Release(ctx context.Context, _ map[string]string) (nodepatch.Outcome, error) {
	if n.onRelease != nil {
		n.onRelease()
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.calls++
	if n.err != nil {
		return "", n.err
	}
	return nodepatch.Patched, nil
}

func (n *fakeNode) FailOpen(ctx context.Context, annotations map[string]string) (nodepatch.Outcome, error) {
	n.mu.Lock()
	n.failOpens++
	n.mu.Unlock()
	return n.Release(ctx, annotations)
}

func (n *fakeNode) Confirm(context.Context, map[string]string) (bool, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.confirms++
	return n.landed, nil
}

func (n *fakeNode) State(context.Context) (nodepatch.State, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return nodepatch.State{Tainted: !n.notHeld, Registered: !errors.Is(n.err, nodepatch.ErrNotRegistered)}, nil
}

func (n *fakeNode) Watch(context.Context) func() { return func() {} }

func (n *fakeNode) Settle(context.Context, time.Duration) (int, error) { return 0, n.settleErr }

func (n *fakeNode) SetCondition(_ context.Context, c nodepatch.Condition) (bool, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.condFails > 0 {
		n.condFails--
		return false, errors.New("connection refused")
	}
	n.conditions = append(n.conditions, c)
	return true, nil
}

func (n *fakeNode) Taint(context.Context) (bool, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.taints++
	return true, nil
}

func (n *fakeNode) Replace(context.Context, dynamic.Interface) (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.replaces++
	if n.replaceErr != nil {
		return "", n.replaceErr
	}
	return "NodeClaim default-x", nil
}

func (n *fakeNode) set(err error) { n.mu.Lock(); n.err = err; n.mu.Unlock() }
func (n *fakeNode) count() int    { n.mu.Lock(); defer n.mu.Unlock(); return n.calls }
func (n *fakeNode) replaced() int { n.mu.Lock(); defer n.mu.Unlock(); return n.replaces }

// reasons lists the reasons of the conditions written, in order.
func (n *fakeNode) reasons() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, c := range n.conditions {
		out = append(out, c.Reason)
	}
	return out
}

// drain returns the Events recorded so far.
func drain(r *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// loadConfig is config.Load of exactly the variables in env, as the agent's
// process would see them; the test fails if they are refused.
func loadConfig(t *testing.T, env map[string]string, dryRun bool) config.Config {
	t.Helper()
	cfg, err := config.Load(config.MapLookup(env), dryRun)
	require.NoError(t, err)
	return cfg
}

// defaultConfig is the configuration with every default and NODE_NAME set.
func defaultConfig(t *testing.T) config.Config {
	t.Helper()
	return loadConfig(t, map[string]string{"NODE_NAME": "node-a", "KUBERNETES_SERVICE_HOST": "10.96.0.1"}, false)
}

// recorded emits the agent's Events through report.Events into client-go's
// FakeRecorder, which keeps each as "Warning CheckFailed note".
type recorded struct {
	*report.Events
	rec *events.FakeRecorder
}

// recorder returns the Events a testAgent emitted.
func recorder(a *Agent) *events.FakeRecorder { return a.events.(recorded).rec }

func testAgent(t *testing.T, node interface {
	nodeReader
	nodeWriter
}, cs ...checks.Check) *Agent {
	t.Helper()
	cfg := defaultConfig(t)
	cfg.MetricsPort = 0 // any free port
	cfg.RetryBackoffBase = time.Millisecond
	cfg.RetryBackoffMax = 5 * time.Millisecond
	cfg.CheckTimeout = time.Second
	rec := events.NewFakeRecorder(100)
	return &Agent{cfg: cfg, log: zerolog.New(io.Discard), checks: cs, read: node, write: node,
		events: recorded{report.EventsTo(rec, "node-a"), rec}, condition: report.NewConditionWriter(node),
		metrics: newMetrics(BuildInfo{Version: "test", Revision: "abc"}), started: time.Now()}
}

// runAgent runs a in the background and returns its cancel and its result.
func runAgent(t *testing.T, a *Agent) (context.CancelFunc, <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(cancel)
	return cancel, done
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 5*time.Second, time.Millisecond, what)
}

func TestRunReleasesThenWaitsForSIGTERM(t *testing.T) {
	node := &fakeNode{}
	a := testAgent(t, node, &fakeCheck{name: "dns"}, &fakeCheck{name: "tcp"})
	cancel, done := runAgent(t, a)

	waitFor(t, "verified", a.verified.Load)
	assert.Equal(t, 1, node.count())
	select {
	case err := <-done:
		t.Fatalf("the agent returned on its own after success: %v", err)
	case <-time.After(50 * time.Millisecond): // a DaemonSet pod must keep running
	}
	assert.Equal(t, 1.0, testutil.ToFloat64(a.metrics.verified))
	assert.Equal(t, 1.0, testutil.ToFloat64(a.metrics.patches.WithLabelValues("patched")))
	assert.Positive(t, testutil.ToFloat64(a.metrics.timeToVerified))

	cancel() // the SIGTERM
	require.NoError(t, <-done)
	assert.Equal(t, 1, node.count(), "no write after success")
}

func TestRunAbortDuringChecksWritesNothing(t *testing.T) {
	node := &fakeNode{}
	blocking := &fakeCheck{name: "dns", block: true}
	a := testAgent(t, node, blocking)
	a.cfg.CheckTimeout = time.Minute
	cancel, done := runAgent(t, a)

	waitFor(t, "check started", func() bool { return blocking.runs.Load() == 1 })
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err, "an abort is not a failure")
	case <-time.After(5 * time.Second):
		t.Fatal("the agent did not stop at once on SIGTERM")
	}
	assert.Zero(t, node.count(), "no write on abort")
	assert.Zero(t, testutil.ToFloat64(a.metrics.failures), "no failure recorded on abort")
	assert.Zero(t, testutil.ToFloat64(a.metrics.rounds), "an aborted round is not recorded")
	assert.False(t, a.verified.Load())
}

// stubbornCheck ignores its context: it returns only when released, as the
// Go resolver returns only at its read deadline.
type stubbornCheck struct {
	started chan struct{}
	release chan struct{}
}

func (c *stubbornCheck) Name() string   { return "dns" }
func (c *stubbornCheck) Target() string { return "target-dns" }
func (c *stubbornCheck) Run(context.Context) error {
	close(c.started)
	<-c.release
	return nil
}

// TestRunAbortDoesNotWaitForChecks: a SIGTERM during the checks aborts at
// once, also when a check does not notice its context ending.
func TestRunAbortDoesNotWaitForChecks(t *testing.T) {
	node := &fakeNode{}
	check := &stubbornCheck{started: make(chan struct{}), release: make(chan struct{})}
	defer close(check.release)
	a := testAgent(t, node, check)
	a.cfg.CheckTimeout = time.Minute
	cancel, done := runAgent(t, a)

	<-check.started
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err, "an abort is not a failure")
	case <-time.After(5 * time.Second):
		t.Fatal("the agent waited for a check that ignores its context")
	}
	assert.Zero(t, node.count(), "no write on abort")
	assert.Zero(t, testutil.ToFloat64(a.metrics.rounds), "an aborted round is not recorded")
}

func TestRunRecordsFailureOnceAndReleasesWhenHealed(t *testing.T) {
	node := &fakeNode{}
	broken := &fakeCheck{name: "dns"}
	broken.fail.Store(true)
	a := testAgent(t, node, broken, &fakeCheck{name: "tcp"})
	a.cfg.MaxRetries = 3
	_, done := runAgent(t, a)

	waitFor(t, "failure recorded", func() bool { return testutil.ToFloat64(a.metrics.failures) == 1 })
	waitFor(t, "checks go on after the failure", func() bool { return broken.runs.Load() >= 6 })
	assert.Equal(t, 1.0, testutil.ToFloat64(a.metrics.failures), "recorded once, not every round")
	assert.Zero(t, node.count(), "a failing node is never released")
	assert.Equal(t, 0.0, testutil.ToFloat64(a.metrics.checkSuccess.WithLabelValues("dns")))
	assert.Equal(t, 1.0, testutil.ToFloat64(a.metrics.checkSuccess.WithLabelValues("tcp")))

	broken.fail.Store(false) // the node heals
	waitFor(t, "released after healing", a.verified.Load)
	assert.Equal(t, 1, node.count())
	assert.Empty(t, done)
}

func TestRunKeepsTryingWhenReleaseIsForbidden(t *testing.T) {
	node := &fakeNode{}
	node.set(nodepatch.ErrForbidden)
	a := testAgent(t, node, &fakeCheck{name: "dns"})
	a.cfg.RetryBackoffBase = 20 * time.Millisecond
	a.cfg.RetryBackoffMax = 20 * time.Millisecond
	_, _ = runAgent(t, a)

	waitFor(t, "retried", func() bool { return node.count() >= 3 })
	assert.False(t, a.verified.Load())
	assert.Positive(t, testutil.ToFloat64(a.metrics.patches.WithLabelValues("error")))

	node.set(nil) // RBAC fixed
	waitFor(t, "released once allowed", a.verified.Load)
}

func TestProbesAndMetrics(t *testing.T) {
	node := &fakeNode{}
	gate := &fakeCheck{name: "dns"}
	gate.fail.Store(true)
	a := testAgent(t, node, gate)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	addr, err := a.serve(ctx)
	require.NoError(t, err)
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}

	code, _ := get("/healthz")
	assert.Equal(t, http.StatusOK, code)
	code, _ = get("/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code, "not ready before verification")

	a.metrics.recordRound(checks.RunAll(ctx, []checks.Check{gate}, time.Second))
	a.verified.Store(true)
	code, _ = get("/readyz")
	assert.Equal(t, http.StatusOK, code)
	code, body := get("/metrics")
	assert.Equal(t, http.StatusOK, code)
	for _, name := range []string{"nodeready_build_info{", "nodeready_checks_total{check=\"dns\",result=\"fail\"} 1", "nodeready_check_duration_seconds_bucket", "go_goroutines"} {
		assert.Contains(t, body, name)
	}
}

func TestMetricsFollowConventions(t *testing.T) {
	m := newMetrics(BuildInfo{Version: "v1", Revision: "abc"})
	m.recordRound([]checks.Result{{Name: "dns", Duration: time.Millisecond}, {Name: "tcp", Err: errors.New("refused")}})
	problems, err := testutil.GatherAndLint(m.registry)
	require.NoError(t, err)
	assert.Empty(t, problems)
}

func TestMetricsServerOffKeepsProbes(t *testing.T) {
	a := testAgent(t, &fakeNode{})
	a.cfg.EnableMetrics = false
	addr, err := a.serve(t.Context())
	require.NoError(t, err)
	for path, want := range map[string]int{"/healthz": 200, "/metrics": 404} {
		resp, err := http.Get("http://" + addr + path)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, want, resp.StatusCode, path)
	}
}

func TestBackoffShapes(t *testing.T) {
	within := func(t *testing.T, want, got time.Duration) {
		t.Helper()
		assert.GreaterOrEqual(t, got, want)
		assert.LessOrEqual(t, got, want+time.Duration(float64(want)*jitter))
	}
	s := time.Second
	tests := map[string][]time.Duration{
		"exponential": {s, 2 * s, 4 * s, 8 * s, 10 * s, 10 * s},
		"linear":      {s, s, s, s}, // kube-node-ready's meaning: the same delay every round
		"constant":    {s, s, s, s},
	}
	for kind, want := range tests {
		t.Run(kind, func(t *testing.T) {
			b := newBackoff(config.Config{RetryBackoff: kind, RetryBackoffBase: s, RetryBackoffMax: 10 * s})
			for i, w := range want {
				got := b.Step()
				t.Logf("round %d: %s", i+1, got)
				within(t, w, got)
			}
		})
	}
}

func TestDryRunTable(t *testing.T) {
	cfg := defaultConfig(t)
	pass, fail := &fakeCheck{name: "dns"}, &fakeCheck{name: "tcp"}
	fail.fail.Store(true)
	var out strings.Builder
	// Built-in checks are replaced by fakes through the table printer's input.
	code := printDryRun(&out, checks.RunAll(t.Context(), []checks.Check{pass, fail, skip("apiserver", "-", "no kubeconfig")}, cfg.CheckTimeout))
	assert.Equal(t, 1, code)
	assert.Regexp(t, `(?m)^dns\s+target-dns\s+pass\s`, out.String())
	assert.Regexp(t, `(?m)^tcp\s+target-tcp\s+fail\s.*broken`, out.String())
	assert.Regexp(t, `(?m)^apiserver\s+-\s+skip\s.*no kubeconfig`, out.String())
	assert.Contains(t, out.String(), "1 passed, 1 failed, 1 skipped")
}

func TestConditionAndEventsTellTheStory(t *testing.T) {
	node := &fakeNode{}
	broken := &fakeCheck{name: "dns"}
	broken.fail.Store(true)
	a := testAgent(t, node, broken, &fakeCheck{name: "tcp"})
	a.cfg.MaxRetries = 2
	rec := recorder(a)
	_, _ = runAgent(t, a)

	waitFor(t, "failure recorded", func() bool { return testutil.ToFloat64(a.metrics.failures) == 1 })
	assert.Equal(t, []string{nodepatch.ReasonChecksFailed}, node.reasons())
	failed := drain(rec)
	require.Len(t, failed, 2)
	assert.Equal(t, "Warning CheckFailed dns target-dns: broken", failed[0])
	assert.Contains(t, failed[1], "Warning VerificationFailed 1 of the checks still failing after 2 rounds")
	assert.Contains(t, failed[1], "failure action: keep-tainted")

	broken.fail.Store(false)
	waitFor(t, "recovered", a.verified.Load)
	assert.Equal(t, []string{nodepatch.ReasonChecksFailed, nodepatch.ReasonVerified}, node.reasons())
	recovered := drain(rec)
	require.Len(t, recovered, 1)
	assert.Contains(t, recovered[0], "Normal Verified All 2 checks passed after a failed verification")
	assert.Zero(t, node.replaced())
}

func TestFailOpenReleasesAfterItsTime(t *testing.T) {
	node := &fakeNode{}
	broken := &fakeCheck{name: "dns"}
	broken.fail.Store(true)
	a := testAgent(t, node, broken)
	a.cfg.MaxRetries = 1
	a.cfg.FailureAction = config.FailOpen
	a.cfg.FailOpenAfter = 100 * time.Millisecond
	var logs syncBuffer
	a.log = zerolog.New(&logs)
	_, _ = runAgent(t, a)

	waitFor(t, "failed open", a.verified.Load)
	assert.GreaterOrEqual(t, time.Since(a.started), 100*time.Millisecond, "not before its time")
	assert.Equal(t, 1, node.count())
	node.mu.Lock()
	assert.Equal(t, 1, node.failOpens, "released as failed open, in the release's own write")
	node.mu.Unlock()
	assert.Equal(t, []string{nodepatch.ReasonChecksFailed, nodepatch.ReasonFailedOpen}, node.reasons())
	var failedOpen []string
	for _, e := range drain(recorder(a)) {
		if strings.HasPrefix(e, "Warning FailedOpen") {
			failedOpen = append(failedOpen, e)
		}
	}
	require.Len(t, failedOpen, 1)
	assert.Contains(t, failedOpen[0], "dns target-dns: broken")
	waitFor(t, "the release logged", func() bool { return strings.Contains(logs.String(), "Verified node") })
	assert.Contains(t, logs.String(), `"reason":"FailedOpen"`)
	assert.NotContains(t, logs.String(), "recovered", "checks still fail: nothing recovered")
}

func TestReplaceNodeOnceAfterFailure(t *testing.T) {
	node := &fakeNode{}
	broken := &fakeCheck{name: "dns"}
	broken.fail.Store(true)
	a := testAgent(t, node, broken)
	a.cfg.MaxRetries = 2
	a.cfg.FailureAction = config.ReplaceNode
	_, _ = runAgent(t, a)

	waitFor(t, "replaced", func() bool { return node.replaced() == 1 })
	waitFor(t, "rounds go on", func() bool { return broken.runs.Load() >= 6 })
	assert.Equal(t, 1, node.replaced(), "replaced once, not every round")
	assert.Zero(t, node.count(), "a failing node is not released")
	assert.Equal(t, []string{nodepatch.ReasonChecksFailed, nodepatch.ReasonReplacing}, node.reasons())
}

func TestReplaceNodeNeverOnAbort(t *testing.T) {
	node := &fakeNode{}
	blocking := &fakeCheck{name: "dns", block: true}
	a := testAgent(t, node, blocking)
	a.cfg.MaxRetries = 1
	a.cfg.FailureAction = config.ReplaceNode
	a.cfg.CheckTimeout = time.Minute
	cancel, done := runAgent(t, a)

	waitFor(t, "check started", func() bool { return blocking.runs.Load() == 1 })
	cancel()
	require.NoError(t, <-done)
	assert.Zero(t, node.replaced())
	assert.Empty(t, node.reasons(), "an abort writes no condition")
	assert.Empty(t, drain(recorder(a)), "an abort records no Event")
}

func TestReverifyTaint(t *testing.T) {
	for _, on := range []bool{false, true} {
		node := &fakeNode{}
		a := testAgent(t, node, &fakeCheck{name: "dns"})
		a.cfg.ReverifyTaint = on
		_, _ = runAgent(t, a)
		waitFor(t, "verified", a.verified.Load)
		want := 0
		if on {
			want = 1
			assert.Equal(t, nodepatch.ReasonVerifying, node.reasons()[0])
		}
		assert.Equal(t, want, node.taints)
	}
}

// TestSIGTERMDuringReleaseIsCarriedThrough: the label makes the DaemonSet
// controller delete the pod at once, often while the release is still
// reading the node back. Checks passed, so the release is finished and
// reported, not taken for an abort.
func TestSIGTERMDuringReleaseIsCarriedThrough(t *testing.T) {
	node := &fakeNode{}
	a := testAgent(t, node, &fakeCheck{name: "dns"})
	var logs syncBuffer
	a.log = zerolog.New(&logs)
	ctx, cancel := context.WithCancel(t.Context())
	node.onRelease = cancel
	require.NoError(t, a.Run(ctx))

	assert.True(t, a.verified.Load(), "the release went through and is reported")
	assert.Equal(t, 1.0, testutil.ToFloat64(a.metrics.verified))
	assert.Equal(t, []string{nodepatch.ReasonVerified}, node.reasons(), "the condition is written after the SIGTERM")
	events := drain(recorder(a))
	require.Len(t, events, 1)
	assert.Contains(t, events[0], "Normal Verified")
	assert.Contains(t, logs.String(), "Stopped after verification")
	assert.NotContains(t, logs.String(), "Aborted", "a verified node is not reported as an abort")
}

// TestConditionWrittenAgainUntilItLands: the condition write after the
// release fails (the API server went away right after the PATCH); the agent
// writes it again while it waits for its SIGTERM.
func TestConditionWrittenAgainUntilItLands(t *testing.T) {
	node := &fakeNode{condFails: 3}
	a := testAgent(t, node, &fakeCheck{name: "dns"})
	var logs syncBuffer
	a.log = zerolog.New(&logs)
	cancel, done := runAgent(t, a)

	waitFor(t, "verified", a.verified.Load)
	waitFor(t, "condition written", func() bool { return len(node.reasons()) == 1 })
	assert.Equal(t, []string{nodepatch.ReasonVerified}, node.reasons())
	var warnings int
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, `"level":"warn"`) && strings.Contains(line, "Could not set node condition") {
			warnings++
		}
	}
	assert.Equal(t, 1, warnings, "one warning, not one per retry")
	assert.Contains(t, logs.String(), `"attempts":4`)
	cancel()
	require.NoError(t, <-done)
	assert.Equal(t, []string{nodepatch.ReasonVerified}, node.reasons(), "written once")
}

// TestConditionLastTryAfterSIGTERM: the SIGTERM comes during the release and
// the condition write right after it fails: one more try before exiting.
func TestConditionLastTryAfterSIGTERM(t *testing.T) {
	node := &fakeNode{condFails: 1}
	a := testAgent(t, node, &fakeCheck{name: "dns"})
	ctx, cancel := context.WithCancel(t.Context())
	node.onRelease = cancel
	require.NoError(t, a.Run(ctx))
	assert.Equal(t, []string{nodepatch.ReasonVerified}, node.reasons())
}

// TestSettleFailureAfterReleaseIsNoAbort: once the write has landed, a settle
// window cut short is a warning; the node is reported verified, not aborted.
func TestSettleFailureAfterReleaseIsNoAbort(t *testing.T) {
	node := &fakeNode{settleErr: context.DeadlineExceeded}
	a := testAgent(t, node, &fakeCheck{name: "dns"})
	var logs syncBuffer
	a.log = zerolog.New(&logs)
	ctx, cancel := context.WithCancel(t.Context())
	node.onRelease = cancel
	require.NoError(t, a.Run(ctx))

	assert.True(t, a.verified.Load())
	assert.Equal(t, 1, node.count(), "no second round")
	assert.Contains(t, logs.String(), "Could not watch the node for the whole settle window")
	assert.Contains(t, logs.String(), "Verified node")
	assert.NotContains(t, logs.String(), "Aborted")
}

// syncBuffer is a log sink safe for the agent's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestMinHoldTimeWaitsWithoutFailing: checks that pass before the hold ends
// wait for it, run once more, and then release; the waiting never counts
// as a failure, however few rounds MAX_RETRIES allows.
func TestMinHoldTimeWaitsWithoutFailing(t *testing.T) {
	node := &fakeNode{}
	check := &fakeCheck{name: "dns"}
	a := testAgent(t, node, check)
	a.cfg.MinHoldTime = 300 * time.Millisecond
	a.cfg.MaxRetries = 1
	_, _ = runAgent(t, a)

	waitFor(t, "released after the hold", a.verified.Load)
	assert.GreaterOrEqual(t, a.released.Sub(a.started), 300*time.Millisecond, "not before the hold ends")
	assert.Equal(t, int32(2), check.runs.Load(), "the checks run again when the hold ends")
	assert.Equal(t, 1, node.count())
	assert.Zero(t, testutil.ToFloat64(a.metrics.failures), "holding is not failing")
}

func TestMinHoldTimeAbort(t *testing.T) {
	node := &fakeNode{}
	check := &fakeCheck{name: "dns"}
	a := testAgent(t, node, check)
	a.cfg.MinHoldTime = time.Hour
	cancel, done := runAgent(t, a)

	waitFor(t, "checks ran", func() bool { return check.runs.Load() == 1 })
	cancel()
	require.NoError(t, <-done)
	assert.Zero(t, node.count(), "a SIGTERM during the hold writes nothing")
}

// TestWaitingForKarpenterIsNotFailing: a Karpenter node that Karpenter has
// not registered yet is not released, and the waiting is never recorded as a
// failed verification nor brings on the failure action, however many rounds
// it takes; once Karpenter registers the node, it is released.
func TestWaitingForKarpenterIsNotFailing(t *testing.T) {
	node := &fakeNode{}
	node.set(nodepatch.ErrNotRegistered)
	a := testAgent(t, node, &fakeCheck{name: "dns"})
	a.cfg.MaxRetries = 2
	a.cfg.FailureAction = config.ReplaceNode
	_, _ = runAgent(t, a)

	waitFor(t, "rounds beyond MAX_RETRIES", func() bool { return node.count() >= 6 })
	assert.False(t, a.verified.Load())
	assert.Zero(t, testutil.ToFloat64(a.metrics.failures), "waiting is not failing")
	assert.Zero(t, node.replaced(), "no failure action while waiting")
	assert.Empty(t, node.reasons(), "no condition while waiting")
	assert.Empty(t, drain(recorder(a)), "no Event while waiting")

	node.set(nil) // Karpenter registered the node
	waitFor(t, "released once registered", a.verified.Load)
	assert.Equal(t, []string{nodepatch.ReasonVerified}, node.reasons())
}
