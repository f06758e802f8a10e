// Package agent runs nodeready on one node: from its configuration (package
// config) it builds the checks, runs rounds of them with backoff, releases the
// node through nodepatch, tells what it did through report (Events and the
// node's condition), serves health and metrics, and waits for the SIGTERM
// that the DaemonSet controller's deletion of its pod brings.
package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"

	"github.com/nodeready/nodeready/checks"
	"github.com/nodeready/nodeready/internal/config"
	"github.com/nodeready/nodeready/internal/kube"
	"github.com/nodeready/nodeready/internal/report"
	"github.com/nodeready/nodeready/internal/wellknown"
	"github.com/nodeready/nodeready/nodepatch"
)

// nodeReader is what the agent reads of its node through nodepatch; tests
// substitute it.
type nodeReader interface {
	Watch(ctx context.Context) (stop func())
	State(ctx context.Context) (nodepatch.State, error)
	Confirm(ctx context.Context, annotations map[string]string) (bool, error)
}

// nodeWriter is what the agent writes to its node through nodepatch: with
// DRY_RUN=true, readOnly, which only logs; tests substitute it.
type nodeWriter interface {
	Release(ctx context.Context, annotations map[string]string) (nodepatch.Outcome, error)
	FailOpen(ctx context.Context, annotations map[string]string) (nodepatch.Outcome, error)
	ReleaseWith(ctx context.Context, c wellknown.Condition, annotations map[string]string) (nodepatch.Outcome, error)
	Withdraw(ctx context.Context, c wellknown.Condition) (bool, error)
	Settle(ctx context.Context, window time.Duration) (int, error)
	SetCondition(ctx context.Context, c wellknown.Condition) (bool, error)
	Taint(ctx context.Context) (bool, error)
	Mark(ctx context.Context, labels, annotations map[string]string) (bool, error)
	Replace(ctx context.Context, dyn dynamic.Interface) (string, error)
}

var (
	_ nodeReader = (*nodepatch.Patcher)(nil)
	_ nodeWriter = (*nodepatch.Patcher)(nil)
)

// eventer emits the Events about the node: report.Events; tests record them.
type eventer interface {
	Eventf(reason wellknown.Reason, note string, args ...any)
}

// Clients are the API clients of the agent. Dynamic is used only to find a
// Karpenter NodeClaim (a custom resource) for FAILURE_ACTION=replace-node.
type Clients struct {
	Kube    kube.Interface
	Dynamic dynamic.Interface
	// APIServer is the API server as Kube reaches it: where the networkpolicy
	// check opens the connection its canary policy allows.
	APIServer checks.APIServerEndpoint
}

// Agent verifies and releases one node.
type Agent struct {
	cfg    config.Config
	log    zerolog.Logger
	checks []checks.Check
	// read and write are the node's Patcher; write only logs with DRY_RUN=true.
	read    nodeReader
	write   nodeWriter
	dynamic dynamic.Interface
	events  eventer
	// condition writes the node's condition through write.
	condition *report.ConditionWriter
	metrics   *metrics
	// started is when the agent first started in this pod (STATE_DIR), from
	// which the timers count.
	started time.Time
	// roundsBefore are the rounds earlier containers of this pod ran (STATE_DIR):
	// MAX_RETRIES counts on from them.
	roundsBefore int
	verified     atomic.Bool
	// policy is the failure policy's part of the configuration (decide).
	policy policy
	// state is the run state that decide moves from round to round.
	state state
	// told are the last release and replacement errors, and the last reason a
	// failure action was withheld, told in an Event, so a repeating one is not
	// told every round.
	told struct{ release, replace, shared string }
	// held is what the last held round's condition said, by its reason and the
	// checks it named (heldKey): a round that fails the same checks the same way
	// writes it again only when it differs in that, not for each new error text,
	// which on a loaded API server is every round.
	held string
	// fleet reads the other nodes' evidence before a failure action, and writes
	// this node's.
	fleet *fleet
	// timeline holds the times of the verification's phases, for the log.
	timeline timeline
	// unread: this round's release could not read the node, so nothing
	// else is read about it before the next round.
	unread bool
	// unconfirmed is the last release when its write got no answer and was
	// not seen to land: it may still have, and is looked for at the SIGTERM.
	unconfirmed *releaseAttempt
	shutdown    func()
	// unwatch stops the watch of the node that begins with the checks.
	unwatch func()
}

// timeline holds when the first round began (start-up ends), when the last
// round's checks ended, and when the release was confirmed (before the settle
// window).
type timeline struct{ firstRound, checked, released time.Time }

// New wires an agent for the node in cfg. started is the process start; the
// timers and the time to verified count from the pod's first start when
// STATE_DIR records one (firstStart).
func New(cfg config.Config, log zerolog.Logger, clients Clients, build BuildInfo, started time.Time) (*Agent, error) {
	list := buildChecks(cfg, clients.Kube, clients.APIServer)
	first, err := firstStart(cfg.StateDir, started)
	switch {
	case err != nil:
		log.Warn().Err(err).Msg("Could not use STATE_DIR, the timers count from this start")
	case first.Before(started):
		log.Info().Time("first_start", first).Dur("since", started.Sub(first).Round(time.Millisecond)).
			Msg("Restarted in the same pod, the timers count from its first start")
	}
	before, err := roundsBefore(cfg.StateDir)
	if err != nil {
		log.Warn().Err(err).Msg("Could not use STATE_DIR, the rounds count from this start")
	} else if before > 0 {
		log.Info().Int("rounds_before", before).Msg("Restarted in the same pod, MAX_RETRIES counts on from its earlier rounds")
	}
	fl := newFleet(cfg, clients.Kube)
	spec := nodepatch.Spec{
		Taints:     cfg.StartupTaints,
		LabelKey:   cfg.VerifiedLabel,
		LabelValue: cfg.VerifiedLabelValue,
		KeepTaints: cfg.ExternalTaint(),
		Labels:     fl.releaseLabels(first),
		Drop:       wellknown.EvidenceAnnotations(cfg.VerifiedLabel),
	}
	p := nodepatch.New(clients.Kube, cfg.NodeName, spec)
	write, events, shutdown := writers(cfg, log, clients.Kube, p, spec)
	m := newMetrics(build, first)
	return &Agent{
		cfg:          cfg,
		log:          log,
		checks:       list,
		read:         holdReader{nodeReader: p, hold: m.hold},
		write:        write,
		dynamic:      clients.Dynamic,
		events:       events,
		condition:    report.NewConditionWriter(write),
		metrics:      m,
		started:      first,
		roundsBefore: before,
		policy:       policyOf(cfg),
		fleet:        fl,
		shutdown:     shutdown,
	}, nil
}

// Run verifies the node, then waits for ctx to end (the SIGTERM that the
// DaemonSet controller's deletion of the pod brings). It returns nil both
// after success and on an abort: a DaemonSet pod restarts Always, so the
// agent never exits on its own, and an abort is not a failure. An error means
// the agent could not start.
func (a *Agent) Run(ctx context.Context) error {
	if a.shutdown != nil {
		defer a.shutdown()
	}
	stopped := whenDone(ctx)
	// The probes are answered until Run returns, through the release's settle
	// window after the SIGTERM: a server that stopped at the SIGTERM would fail
	// the liveness probe and leave Warning Events on every verified node.
	serving, stopServing := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServing()
	addr, err := a.serve(serving)
	if err != nil {
		return err
	}
	a.log.Info().Str("address", addr).Int("checks", len(a.checks)).Str("taint", a.taint()).
		Str("label", a.cfg.VerifiedLabel+"="+a.cfg.VerifiedLabelValue).Msg("Started verification")
	// The node is watched from now on, while the checks run: the release
	// then plans its write from the node as last seen, with no read of its
	// own, and the settle window goes on with the same watch. It runs on
	// after the SIGTERM, which the release itself brings.
	a.unwatch = a.read.Watch(context.WithoutCancel(ctx))
	defer a.unwatch()
	if a.cfg.ReverifyTaint {
		a.retaint(ctx)
	}
	if !a.verify(ctx) {
		switch {
		case a.state.deleting && !a.cfg.ReadOnly:
			a.log.Info().Str("reason", cause(ctx)).Msg("Stopped, the node was being replaced")
		case a.unconfirmed != nil:
			// The last release's write got no answer and the node could not be read
			// since: it may have landed (its label may be what brought the SIGTERM).
			a.log.Warn().Str("reason", cause(ctx)).Msg("Stopped with the last release's outcome unknown")
		default:
			a.log.Info().Str("reason", cause(ctx)).Msg("Aborted verification, node left as it was")
		}
		a.condition.LastFlush(ctx, a.log)
		return nil
	}
	a.awaitStop(ctx)
	a.log.Info().Str("reason", cause(ctx)).Msg("Stopped after verification")
	a.awaitFinalScrape(ctx, stopped())
	return nil
}

// awaitStop waits for ctx to end (the SIGTERM), meanwhile writing again a
// condition whose write failed, at the rounds' backoff.
func (a *Agent) awaitStop(ctx context.Context) {
	delays := newBackoff(a.cfg)
	for a.condition.NextRound(); ctx.Err() == nil && !a.condition.Flush(ctx, a.log); a.condition.NextRound() {
		select {
		case <-ctx.Done():
		case <-time.After(delays.Step()):
		}
	}
	<-ctx.Done()
	a.condition.LastFlush(ctx, a.log)
}

// observe reads the node's state, once it is registered, to learn whether
// nodeready holds it: whether it carried the startup taint when the agent
// started. It runs after the first round with problems, so a node that
// passes at once costs no read beyond the release's own. A Karpenter node
// gets its startup taint only at registration, so until then it is read
// again after each such round. A read that fails is tried again after the
// next; until a read succeeds the node counts as not held, so nothing
// destructive can happen on a guess.
func (a *Agent) observe(ctx context.Context, log zerolog.Logger) {
	if a.state.observed || a.unread {
		return
	}
	s, err := a.read.State(ctx)
	if err != nil {
		log.Warn().Err(err).Msg("Could not read the node, will try again")
		return
	}
	if a.state = a.state.observedAs(s); !a.state.observed {
		return
	}
	ev := log.Info().Bool("held", a.state.held).Bool("labelled", s.Labelled)
	if a.state.held {
		ev.Str("taint", a.taint()).Msg("Holding node until its checks pass")
	} else {
		ev.Msg("Node has no startup taint: it will be labelled when its checks pass, never failed open or replaced")
	}
}

// verify runs rounds of checks until they pass and the node is released
// (true) or ctx ends (false). After each round decide says what its result
// brings: the failure recorded, the condition and Events following the round,
// the failure action.
func (a *Agent) verify(ctx context.Context) bool {
	delays := newBackoff(a.cfg)
	for round := a.roundsBefore + 1; ; round++ {
		a.condition.NextRound()
		log := a.log.With().Int("attempt", round).Logger()
		if round == a.roundsBefore+1 {
			a.timeline.firstRound = time.Now()
		} else {
			a.condition.Flush(ctx, log)
		}
		r := a.round(ctx, log)
		if r.verdict != aborted {
			a.metrics.misconfigured.Set(float64(min(len(r.misconfigured), 1)))
		}
		switch {
		case r.verdict == released:
			return true
		case ctx.Err() != nil:
			return a.releasedLate(ctx, log)
		case r.verdict == problems:
			a.observe(ctx, log)
		}
		if err := recordRounds(a.cfg.StateDir, round); err != nil && round == a.roundsBefore+1 {
			log.Warn().Err(err).Msg("Could not record the rounds in STATE_DIR, a restarted container will count MAX_RETRIES anew")
		}
		d := decide(a.state, r, round, time.Since(a.started), a.policy)
		if a.carryOut(ctx, log, d, r, round) {
			return true
		}
		if a.state.deleting && !a.cfg.ReadOnly {
			// The node is going: nothing more to check or write on it. The pod ends
			// with the node (or its drain). DRY_RUN=true deleted nothing: its rounds go on.
			<-ctx.Done()
			return false
		}
		delay := delays.Step()
		if d.capped {
			delay = a.cfg.RetryBackoffMax
		}
		select {
		case <-ctx.Done():
			return a.releasedLate(ctx, log)
		case <-time.After(delay):
		}
	}
}

// round runs every check concurrently and, when all pass, releases the node.
// Its result says whether the node was released, or else what stands in the
// way and by whose fault: checks that failed on this node, and what is wrong
// with the cluster or the installation rather than the node (a check no node
// could pass, a release refused by RBAC or an admission policy). A SIGTERM
// during the checks aborts the round (nothing released, no problems recorded);
// once the checks have passed, the release is carried through, so an ended
// context never hides a write that happened. A Karpenter node that Karpenter
// has not registered yet is waited for: no problems either.
func (a *Agent) round(ctx context.Context, log zerolog.Logger) result {
	results, stopped := a.runChecks(ctx)
	if stopped {
		return result{verdict: aborted}
	}
	a.timeline.checked, a.unread = time.Now(), false
	a.metrics.recordRound(results)
	var r result
	var notChecked []string
	var said reports
	unchecked := map[wellknown.Reason][]string{} // the Event's reason -> the checks it tells of
	for _, res := range results {
		ev := log.Debug()
		problem := fmt.Sprintf("%s %s: %v", res.Name, res.Target, res.Err)
		switch {
		case res.Misconfigured():
			ev = log.Error()
			r.misconfigured = append(r.misconfigured, problem)
		case res.Unattributed():
			ev = log.Warn()
			r.unattributed = append(r.unattributed, problem)
			r.unattributedChecks = appendOnce(r.unattributedChecks, res.Name)
		case uncheckable(res.Err) != "":
			ev = log.Warn()
			notChecked = append(notChecked, problem)
			unchecked[uncheckable(res.Err)] = append(unchecked[uncheckable(res.Err)], problem)
		case !res.Passed() && !res.Skipped():
			ev = log.Warn()
			r.failing = append(r.failing, problem)
			r.failingChecks = appendOnce(r.failingChecks, res.Name)
		}
		if !res.Report.Empty() {
			ev = ev.Strs("reached", res.Report.Reached).Strs("not_proven", res.Report.NotProven).Strs("unreachable", res.Report.Unreachable)
			said.add(res)
		}
		ev.Str("check", res.Name).Str("target", res.Target).Str("result", res.Status()).
			Float64("duration_seconds", res.Duration.Seconds()).AnErr("error", res.Err).Msg("Ran check")
	}
	if len(r.all()) > 0 {
		r.verdict = problems
		return r
	}
	if left := a.cfg.MinHoldTime - time.Since(a.started); left > 0 {
		// MIN_HOLD_TIME is waiting, not failing: it never counts toward
		// a recorded failure. The checks run once more when it ends, so
		// the release reflects the node as it is then.
		log.Info().Dur("left", left).Msg("Checks passed, holding the taint for MIN_HOLD_TIME")
		select {
		case <-ctx.Done():
			return result{verdict: aborted}
		case <-time.After(left):
		}
		return a.round(ctx, log)
	}
	msg := fmt.Sprintf("All %d checks passed", len(results))
	if len(notChecked) > 0 {
		msg = fmt.Sprintf("%d of %d checks passed, %s", len(results)-len(notChecked), len(results), strings.Join(notChecked, "; "))
	}
	if p := unchecked[wellknown.DNSNotChecked]; len(p) > 0 {
		log.Warn().Strs("not_checked", p).Msg("Cluster DNS is not running anywhere, releasing without the dns check")
	}
	if p := unchecked[wellknown.PodNetworkNotChecked]; len(p) > 0 {
		log.Warn().Strs("not_checked", p).Msg("No pod of the Service runs on another node, releasing without the podnetwork check")
	}
	msg += said.message()
	if a.state.failed {
		msg += " after a failed verification"
	}
	if err := a.release(ctx, log, wellknown.Condition{Status: corev1.ConditionTrue, Reason: wellknown.Verified, Message: msg}); err != nil {
		a.unread = nodepatch.IsReadError(err)
		if errors.Is(err, nodepatch.ErrNotRegistered) || errors.Is(err, nodepatch.ErrUnknownOutcome) || momentary(err) {
			return result{verdict: waiting} // for Karpenter or the API server: no problem of the node or the installation
		}
		return result{verdict: problems, misconfigured: []string{"release: " + err.Error()}}
	}
	// Said once, when the release happened: not by rounds that then waited or failed.
	for _, reason := range []wellknown.Reason{wellknown.DNSNotChecked, wellknown.PodNetworkNotChecked} {
		if p := unchecked[reason]; len(p) > 0 {
			a.events.Eventf(reason, "Released without the %s check: %s", strings.SplitN(p[0], " ", 2)[0], strings.Join(p, "; "))
		}
	}
	said.tell(a.events)
	return result{verdict: released}
}

// uncheckable returns the reason of the Event for a check that cannot be checked because
// no node could pass it, or "" for any other result.
func uncheckable(err error) wellknown.Reason {
	switch {
	case errors.Is(err, checks.ErrNoClusterDNS):
		return wellknown.DNSNotChecked // no cluster DNS runs anywhere (bootstrap)
	case errors.Is(err, checks.ErrNoPodsElsewhere):
		return wellknown.PodNetworkNotChecked // no pod of the Service runs on another node
	}
	return ""
}

// runChecks runs every check once and returns the results, or aborted when
// ctx ends first. A SIGTERM aborts at once, without waiting for checks that
// are slow to notice: the Go resolver, for one, waits for its read deadline
// (up to CHECK_TIMEOUT) after its context is cancelled. Those end on their
// own by CHECK_TIMEOUT.
func (a *Agent) runChecks(ctx context.Context) (results []checks.Result, stopped bool) {
	done := make(chan []checks.Result, 1)
	go func() { done <- checks.RunAll(ctx, a.checks, a.cfg.CheckTimeout) }()
	select {
	case results = <-done:
		return results, ctx.Err() != nil
	case <-ctx.Done():
		return nil, true
	}
}

// appendOnce appends name to names unless it is there.
func appendOnce(names []string, name string) []string {
	if slices.Contains(names, name) {
		return names
	}
	return append(names, name)
}

func (a *Agent) taint() string {
	t := a.cfg.StartupTaints[0] // TAINT_KEY's
	return t.Key + "=" + t.Value + ":" + string(t.Effect)
}

// cause names why ctx ended, for the log.
func cause(ctx context.Context) string {
	if err := context.Cause(ctx); err != nil {
		return strings.TrimPrefix(err.Error(), "context ")
	}
	return "done"
}

// buildChecks builds the checks of CHECKS from the configuration, through the
// checks' catalog. apiServer is Clients.APIServer, its Addr empty in --dry-run.
func buildChecks(c config.Config, client kube.Interface, apiServer checks.APIServerEndpoint) []checks.Check {
	env := checks.Env{
		Client:             client,
		Node:               c.NodeName,
		VerifiedLabel:      c.VerifiedLabel,
		VerifiedLabelValue: c.VerifiedLabelValue,
		APIServer:          apiServer,
	}
	if client != nil {
		env.FleetPassed = newFleet(c, client).passed
	}
	return checks.Build(c.Checks, &c.Options, env)
}
