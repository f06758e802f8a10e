package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/nodeready/nodeready/internal/report"
	"github.com/nodeready/nodeready/internal/wellknown"
	"github.com/nodeready/nodeready/nodepatch"
)

// release releases the node with its condition and the completion annotations,
// reports an Event, and settles. It all runs on a context the SIGTERM does not
// cancel, bounded well inside the termination grace period: the label makes the
// DaemonSet controller delete the pod at once (often before the write's answer),
// and a release cut short would be a write nobody reports, leaving `kubectl
// describe node` telling an old story. The condition and the label go out at once
// and the label's write tests for the condition, so the label never lands before
// it (nodepatch.ReleaseWith). A write that got no answer is not a failure yet:
// whether it landed is found out (Confirm), on time kept back from the write for
// that. A release that did not land takes its condition back (releaseFailed). The
// Event's reason is the condition's: Verified, or FailedOpen.
//
// When another controller owns the startup taint (TAINT_OWNER=external), the
// condition is what releases the node (that controller removes the taint when it
// turns True) and the label ends the agent: the same write order holds the label
// back until the condition is stored, and a condition that cannot be written fails
// the release. So does it otherwise: the label never says more than the condition.
func (a *Agent) release(ctx context.Context, log zerolog.Logger, cond wellknown.Condition) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), report.ReleaseBudget(a.cfg.SettleTime))
	defer cancel()
	r := releaseAttempt{cond: cond, elapsed: time.Since(a.started)}
	r.annotations = map[string]string{
		wellknown.ReleasedAtAnnotation(a.cfg.VerifiedLabel): time.Now().UTC().Format(time.RFC3339),
		wellknown.DurationAnnotation(a.cfg.VerifiedLabel):   r.elapsed.Round(time.Millisecond).String(),
	}
	deadline, _ := ctx.Deadline()
	write, cancelWrite := context.WithDeadline(ctx, deadline.Add(-report.ConfirmBudget))
	// The node's state, from the watch without a request of its own, for the hold time.
	_, err := a.read.State(write)
	sent := err == nil
	var outcome nodepatch.Outcome
	if sent {
		outcome, err = a.write.ReleaseWith(write, cond, r.annotations)
	}
	cancelWrite()
	if errors.Is(err, nodepatch.ErrUnknownOutcome) {
		outcome, err = a.confirm(ctx, log, err, r.annotations)
	}
	if err != nil {
		if errors.Is(err, nodepatch.ErrUnknownOutcome) || errors.Is(err, errDidNotLand) {
			a.unconfirmed = &r // looked for once more at the SIGTERM
		}
		if !a.releaseFailed(ctx, log, err, cond, sent) {
			return err
		}
		outcome = nodepatch.Patched // the write that got no answer landed after all
	}
	if outcome == nodepatch.Unchanged && a.unconfirmed != nil {
		outcome = nodepatch.Patched // an earlier write that got no answer landed
	}
	a.unconfirmed = nil
	a.finish(ctx, log, r, outcome)
	return nil
}

// releaseAttempt is what a release writes and how it is reported.
type releaseAttempt struct {
	cond        wellknown.Condition
	annotations map[string]string
	elapsed     time.Duration // from the agent's start to the release
}

// confirm finds out whether a release whose write got no answer (err)
// landed: then it is the release's outcome. Otherwise the error says why
// not, and still counts as ErrUnknownOutcome: the write may land later.
func (a *Agent) confirm(ctx context.Context, log zerolog.Logger, err error, annotations map[string]string) (nodepatch.Outcome, error) {
	landed, cerr := a.read.Confirm(ctx, annotations)
	switch {
	case cerr != nil:
		return "", fmt.Errorf("%w; could not tell whether it landed: %w", err, cerr)
	case !landed && answered500(err):
		// The API server answered with an error and the node shows the write did not
		// land: a definite failure with the server's message (a webhook that is down
		// answers 500 "failed calling webhook" every time), no longer an unknown
		// outcome to wait for.
		return "", fmt.Errorf("%s; the node as read afterwards is not released: %w", err.Error(), errDidNotLand)
	case !landed:
		return "", fmt.Errorf("%w; the node as read is not released", err)
	}
	log.Info().AnErr("error", err).Msg("Release got no answer, the node shows it landed")
	return nodepatch.Patched, nil
}

// releasedLate looks, once the SIGTERM has come, for a release whose write
// got no answer and was not seen to land: the label that write sets is what
// brings the DaemonSet controller's deletion. If it landed, the release is
// reported as usual, on a release budget of its own, and it returns true.
// If that cannot be told, a.unconfirmed stays set, for the last line to say so.
func (a *Agent) releasedLate(ctx context.Context, log zerolog.Logger) bool {
	r := a.unconfirmed
	if r == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), report.ReleaseBudget(a.cfg.SettleTime))
	defer cancel()
	landed, err := a.read.Confirm(ctx, r.annotations)
	if err != nil {
		log.Warn().Err(err).Msg("Could not tell whether the last release landed")
		return false
	}
	a.unconfirmed = nil
	if !landed {
		return false
	}
	log.Info().Msg("Release that got no answer landed")
	a.finish(ctx, log, *r, nodepatch.Patched)
	return true
}

// finish reports a release that landed: the condition, the Event, the
// settle window, and the node verified.
func (a *Agent) finish(ctx context.Context, log zerolog.Logger, r releaseAttempt, outcome nodepatch.Outcome) {
	a.told.release = ""
	a.timeline.released = time.Now()
	a.metrics.released(a.timeline.released)
	a.metrics.patches.WithLabelValues(string(outcome)).Inc()
	log.Info().Str("outcome", string(outcome)).Str("taint", a.taint()).Str("label", a.cfg.VerifiedLabel).
		Msg("Released node")

	a.condition.Replace(ctx, log, r.cond)
	a.events.Eventf(r.cond.Reason, "%s; released in %s", r.cond.Message, r.elapsed.Round(time.Millisecond))

	// The write has landed: the label brings the SIGTERM whatever happens
	// next, so a settle window cut short is reported, not a failed round.
	again, err := a.write.Settle(ctx, a.cfg.SettleTime)
	if again > 0 {
		log.Warn().Int("times", again).Str("taint", a.taint()).Msg("Startup taint came back after the release, removed it again")
	}
	if err != nil {
		ev := log.Warn()
		if errors.Is(err, nodepatch.ErrForbidden) || errors.Is(err, nodepatch.ErrNodeNotFound) {
			ev = log.Error()
		}
		ev.Err(err).Dur("settle_time", a.cfg.SettleTime).Msg("Could not watch the node for the whole settle window")
	}
	if a.unwatch != nil {
		a.unwatch() // the settle window is over: nothing reads the node any more
	}
	a.verified.Store(true)
	a.metrics.verified.Set(1)
	a.metrics.timeToVerified.Set(a.timeline.released.Sub(a.started).Seconds())
	a.metrics.finalNumbers()
	ev := log.Info()
	switch {
	case r.cond.Reason != wellknown.Verified: // released with failing checks (fail-open): nothing recovered
		ev = log.Warn()
	case a.state.failed:
		ev = log.Warn().Bool("recovered", true)
	}
	t := a.timeline
	ev.Str("reason", string(r.cond.Reason)).Float64("duration_seconds", t.released.Sub(a.started).Seconds()).
		Float64("startup_seconds", t.firstRound.Sub(a.started).Seconds()).
		Float64("checks_seconds", t.checked.Sub(t.firstRound).Seconds()).
		Float64("release_seconds", t.released.Sub(t.checked).Seconds()).
		Msg("Verified node")
}

// releaseFailed records a release that did not go through, with cond the
// condition it wrote (or may have, when sent), and reports whether the node shows the
// release landed after all. Once the checks have passed, what stops the release
// is the installation or the API, not the node: it is reported as such (an Event
// when the error is new), never counted as a failed check. The condition the
// release may have left True on the node, which stays held, is taken back at once
// (withdraw): for a refusal with why (Misconfigured), for a moment's failure with
// Verifying, which the next round's release turns True again.
func (a *Agent) releaseFailed(ctx context.Context, log zerolog.Logger, err error, cond wellknown.Condition, sent bool) bool {
	a.metrics.patches.WithLabelValues("error").Inc()
	switch {
	case errors.Is(err, nodepatch.ErrNotRegistered):
		// Found before anything was written.
		log.Info().Err(err).Msg("Could not release node")
		return false
	case errors.Is(err, nodepatch.ErrUnknownOutcome), momentary(err):
		// The API server did not answer, or is busy or away for a moment: neither the
		// installation nor the node is at fault. The release is written again the next
		// round; until then the node says it is not released yet.
		log.Warn().Err(err).Msg("Could not release node, will try again")
		if !sent {
			return false
		}
		return a.withdraw(ctx, log, cond, wellknown.Condition{Status: corev1.ConditionFalse, Reason: wellknown.Verifying,
			Message: cond.Message + "; not released yet, the release is written again: " + err.Error()})
	}
	t := told{level: zerolog.WarnLevel, msg: "Could not release node, the checks passed: fix the installation, the node is not at fault",
		fields: map[string]any{"error": err}}
	if errors.Is(err, nodepatch.ErrForbidden) || errors.Is(err, nodepatch.ErrNodeNotFound) {
		t.level = zerolog.ErrorLevel
	}
	if msg := err.Error(); msg != a.told.release {
		a.told.release = msg
		t.reason = wellknown.ReleaseFailed
		t.note = "Checks passed but the release failed (a misconfiguration, not a failed check; no failure action follows): " + msg
	}
	problem := a.state.problemCondition(result{misconfigured: []string{"release: " + err.Error()}}, "")
	if !sent {
		t.condition = &problem
	}
	a.tell(ctx, log, t)
	return sent && a.withdraw(ctx, log, cond, problem)
}

// withdraw writes c in place of cond, the condition of a release that failed, and
// reports whether the node shows the release landed after all (then nothing is
// written). A withdrawal that fails is kept and written again, as any condition.
func (a *Agent) withdraw(ctx context.Context, log zerolog.Logger, cond, c wellknown.Condition) bool {
	released, err := a.write.Withdraw(ctx, c)
	switch {
	case released:
		log.Info().Msg("Release landed although its write failed")
		return true
	case err != nil:
		a.condition.Wrote(cond) // may be on the node: c differs from it, so it is written
		a.condition.Set(ctx, log, c)
	default:
		a.condition.Wrote(c)
	}
	return false
}

// errDidNotLand: a release write failed and the node, read afterwards, shows it did not land.
var errDidNotLand = errors.New("the write did not land")

// momentary reports an API error that says nothing about the installation: the API server
// was too busy (429, after client-go's own retries), unavailable or timed out (503, 504),
// or could not be reached. Only a refusal is a misconfiguration: 401, 403, an admission
// denial, or a 400 or 422 that is not a lost lock (nodepatch retries those itself).
func momentary(err error) bool {
	for _, refusal := range []error{errDidNotLand, nodepatch.ErrForbidden, nodepatch.ErrNodeNotFound, nodepatch.ErrNotConfirmed} {
		if errors.Is(err, refusal) {
			return false
		}
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true // no answer at all
	}
	return apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsTimeout(err)
}

// answered500 reports whether the API server answered the write with 500 Internal Server
// Error (an admission webhook that failed, among others), rather than not at all or with a
// 503 or 504 of a server that is away for a moment.
func answered500(err error) bool { return apierrors.IsInternalError(err) }
