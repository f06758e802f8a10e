package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeready/nodeready/checks"
	"github.com/nodeready/nodeready/nodepatch"
)

// releaser is what the agent needs of nodepatch; tests substitute it.
type releaser interface {
	Release(ctx context.Context) (nodepatch.Outcome, error)
	Settle(ctx context.Context, window time.Duration) (int, error)
}

// releaseBudget bounds a release that Settle starts as its window closes.
const releaseBudget = 5 * time.Second

// Agent verifies and releases one node.
type Agent struct {
	cfg      Config
	log      zerolog.Logger
	checks   []checks.Check
	node     releaser
	metrics  *metrics
	started  time.Time
	verified atomic.Bool
	// released is when the release was confirmed, before the settle window.
	released time.Time
}

// New wires an agent for the node in cfg. started is the process start, from
// which the initial timeout and the time to verified are measured.
func New(cfg Config, log zerolog.Logger, client kubernetes.Interface, build BuildInfo, started time.Time) (*Agent, error) {
	list, err := buildChecks(cfg, client)
	if err != nil {
		return nil, err
	}
	spec := nodepatch.Spec{
		Taint:      corev1.Taint{Key: cfg.TaintKey, Value: cfg.TaintValue, Effect: corev1.TaintEffect(cfg.TaintEffect)},
		LabelKey:   cfg.VerifiedLabel,
		LabelValue: cfg.VerifiedLabelValue,
	}
	return &Agent{
		cfg:     cfg,
		log:     log,
		checks:  list,
		node:    nodepatch.New(client, cfg.NodeName, spec),
		metrics: newMetrics(build),
		started: started,
	}, nil
}

// Run verifies the node, then waits for ctx to end (the SIGTERM that the
// DaemonSet controller's deletion of the pod brings). It returns nil both
// after success and on an abort: a DaemonSet pod restarts Always, so the
// agent never exits on its own, and an abort is not a failure. An error means
// the agent could not start.
func (a *Agent) Run(ctx context.Context) error {
	addr, err := a.serve(ctx)
	if err != nil {
		return err
	}
	a.log.Info().Str("address", addr).Int("checks", len(a.checks)).Str("taint", a.taint()).
		Str("label", a.cfg.VerifiedLabel+"="+a.cfg.VerifiedLabelValue).Msg("Started verification")
	if !a.verify(ctx) {
		a.log.Info().Str("reason", cause(ctx)).Msg("Aborted verification, node left as it was")
		return nil
	}
	<-ctx.Done()
	a.log.Info().Str("reason", cause(ctx)).Msg("Stopped after verification")
	return nil
}

// verify runs rounds of checks until they pass and the node is released
// (true) or ctx ends (false). Failures never end it: after MAX_RETRIES
// rounds or INITIAL_TIMEOUT the failure is recorded once, and the rounds go
// on at the capped backoff so a node that heals is released without anyone
// restarting the pod.
func (a *Agent) verify(ctx context.Context) bool {
	delays := newBackoff(a.cfg)
	failed := false
	for round := 1; ; round++ {
		log := a.log.With().Int("attempt", round).Logger()
		problems := a.round(ctx, log)
		if ctx.Err() != nil {
			return false
		}
		if len(problems) == 0 {
			a.verified.Store(true)
			elapsed := a.released.Sub(a.started)
			a.metrics.verified.Set(1)
			a.metrics.timeToVerified.Set(elapsed.Seconds())
			ev := log.Info()
			if failed {
				ev = log.Warn().Bool("recovered", true)
			}
			ev.Float64("duration_seconds", elapsed.Seconds()).Msg("Verified node")
			return true
		}
		if !failed && (round >= a.cfg.MaxRetries || time.Since(a.started) >= a.cfg.InitialTimeout) {
			failed = true
			a.metrics.failures.Inc()
			log.Error().Strs("failing", problems).Dur("retry_interval", a.cfg.RetryBackoffMax).
				Msg("Verification failed, node stays tainted and checks go on")
		}
		delay := delays.Step()
		if failed {
			delay = a.cfg.RetryBackoffMax
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(delay):
		}
	}
}

// round runs every check concurrently and, when all pass, releases the node.
// It returns what stands in the way, for people: empty means released.
func (a *Agent) round(ctx context.Context, log zerolog.Logger) []string {
	results := checks.RunAll(ctx, a.checks, a.cfg.CheckTimeout)
	if ctx.Err() != nil {
		return nil // aborted: nothing is recorded
	}
	a.metrics.recordRound(results)
	var problems []string
	for _, r := range results {
		ev := log.Debug()
		if !r.Passed() && !r.Skipped() {
			ev = log.Warn()
			problems = append(problems, fmt.Sprintf("%s %s: %v", r.Name, r.Target, r.Err))
		}
		ev.Str("check", r.Name).Str("target", r.Target).Str("result", r.Status()).
			Float64("duration_seconds", r.Duration.Seconds()).AnErr("error", r.Err).Msg("Ran check")
	}
	if len(problems) > 0 {
		return problems
	}
	outcome, err := a.node.Release(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return a.releaseFailed(log, err)
	}
	a.released = time.Now()
	a.metrics.patches.WithLabelValues(string(outcome)).Inc()
	log.Info().Str("outcome", string(outcome)).Str("taint", a.taint()).Str("label", a.cfg.VerifiedLabel).
		Msg("Released node")

	// The label is on, so the DaemonSet controller is about to delete the
	// pod: the SIGTERM must not cut the settle window short, or a taint
	// merged back now would stay. The window is bounded well inside the
	// termination grace period.
	settleCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.SettleTime+releaseBudget)
	defer cancel()
	again, err := a.node.Settle(settleCtx, a.cfg.SettleTime)
	if again > 0 {
		log.Warn().Int("times", again).Str("taint", a.taint()).Msg("Startup taint came back after the release, removed it again")
	}
	if err != nil {
		return a.releaseFailed(log, err)
	}
	return nil
}

// releaseFailed records a release that did not go through and returns it
// as the round's problem.
func (a *Agent) releaseFailed(log zerolog.Logger, err error) []string {
	a.metrics.patches.WithLabelValues("error").Inc()
	ev := log.Warn()
	switch {
	case errors.Is(err, nodepatch.ErrNotRegistered):
		ev = log.Info()
	case errors.Is(err, nodepatch.ErrForbidden), errors.Is(err, nodepatch.ErrNodeNotFound):
		ev = log.Error()
	}
	ev.Err(err).Msg("Could not release node")
	return []string{"release: " + err.Error()}
}

func (a *Agent) taint() string {
	return a.cfg.TaintKey + "=" + a.cfg.TaintValue + ":" + a.cfg.TaintEffect
}

// cause names why ctx ended, for the log.
func cause(ctx context.Context) string {
	if err := context.Cause(ctx); err != nil {
		return strings.TrimPrefix(err.Error(), "context ")
	}
	return "done"
}
