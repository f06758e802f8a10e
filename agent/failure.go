package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodeready/nodeready/internal/config"
	"github.com/nodeready/nodeready/internal/wellknown"
	"github.com/nodeready/nodeready/nodepatch"
)

// recordFailure records, once, that the retries or the initial timeout ran
// out: an Error log line with every failing check and misconfiguration, a
// CheckFailed Event per failing check, a VerificationFailed Event naming the
// failure action (or why none applies), and the condition.
func (a *Agent) recordFailure(ctx context.Context, log zerolog.Logger, round int, failing, misconfigured []string) {
	a.failed = true
	a.metrics.failures.Inc()
	problems := append(append([]string(nil), failing...), misconfigured...)
	action := a.failureAction(misconfigured)
	log.Error().Strs("failing", failing).Strs("misconfigured", misconfigured).Str("action", action).
		Dur("retry_interval", a.cfg.RetryBackoffMax).Msg("Verification failed, node stays as it is")
	for _, p := range failing {
		a.events.Eventf(wellknown.CheckFailed, "%s", p)
	}
	a.events.Eventf(wellknown.VerificationFailed, "%d of the checks still failing after %d rounds and %s; node stays as it is; failure action: %s",
		len(problems), round, time.Since(a.started).Round(time.Second), action)
	a.condition.Set(ctx, log, a.problemCondition(failing, misconfigured))
}

// problemCondition is the condition of a round with problems: ChecksFailed while a check
// fails, Misconfigured when only the installation stands in the way; with the reason the
// node was not replaced, when replace-node could not.
func (a *Agent) problemCondition(failing, misconfigured []string) wellknown.Condition {
	reason := wellknown.ChecksFailed
	if len(failing) == 0 {
		reason = wellknown.Misconfigured
	}
	msg := summary(slices.Concat(failing, misconfigured))
	if a.replaceErr != "" && len(failing) > 0 {
		msg += "; not replaced: " + a.replaceErr
	}
	return wellknown.Condition{Status: corev1.ConditionFalse, Reason: reason, Message: msg}
}

// failureAction names the failure action that applies, or why none does:
// only a node nodeready holds is ever failed open or replaced, and a
// misconfiguration is never the node's fault. A Karpenter node whose checks
// fail before Karpenter registered it is not known to be held yet: its agent
// starts before the registration, and the startup taint comes with it.
func (a *Agent) failureAction(misconfigured []string) string {
	switch {
	case a.cfg.FailureAction == config.KeepTainted:
		return config.KeepTainted
	case !a.observed:
		return "none yet, the node's state is not known (a Karpenter node is read once Karpenter has registered it); " +
			a.cfg.FailureAction + " once it is known to be held"
	case !a.held:
		return "none, the node is not held by nodeready (it had no startup taint when the agent started)"
	case len(misconfigured) > 0:
		return "none while the installation is misconfigured (" + a.cfg.FailureAction + " once only checks fail)"
	default:
		return a.cfg.FailureAction
	}
}

// act carries out FAILURE_ACTION after a recorded failure of the checks. It
// returns true when the node was released (fail-open). It never runs on an
// abort (verify calls it only while ctx is live) nor on a node nodeready
// does not hold: a node that predates the install, or whose taint someone
// else removed, carries workloads that nodeready never kept away.
func (a *Agent) act(ctx context.Context, log zerolog.Logger, problems []string) bool {
	if !a.held {
		return false
	}
	switch a.cfg.FailureAction {
	case config.FailOpen:
		if time.Since(a.started) < a.cfg.FailOpenAfter {
			return false
		}
		msg := fmt.Sprintf("Released after %s with failing checks: %s", a.cfg.FailOpenAfter, summary(problems))
		log.Warn().Strs("failing", problems).Msg("Failing open")
		err := a.release(ctx, log, wellknown.Condition{Status: corev1.ConditionFalse, Reason: wellknown.FailedOpen, Message: msg},
			wellknown.FailedOpen)
		return err == nil
	case config.ReplaceNode:
		if a.replaced {
			return false
		}
		what, err := a.write.Replace(ctx, a.dynamic)
		if err != nil {
			a.replaceFailed(ctx, log, err, problems)
			return false
		}
		a.replaced, a.deleting = true, true
		a.condition.Set(ctx, log, wellknown.Condition{Status: corev1.ConditionFalse, Reason: wellknown.Replacing, Message: summary(problems)})
		log.Warn().Str("deleted", what).Msg("Replacing node")
		note := fmt.Sprintf("Deleted %s because checks failed: %s", what, summary(problems))
		if strings.HasPrefix(what, "Node ") {
			note += "; " + withoutNodeClaim
		}
		a.events.Eventf(wellknown.ReplacingNode, "%s", note)
	}
	return false
}

// withoutNodeClaim says what deleting a Node object does where no Karpenter NodeClaim owns
// it: the kubelet registers its node only when it starts, so the machine runs on outside the
// cluster until something on the infrastructure's side replaces it.
const withoutNodeClaim = "no Karpenter NodeClaim owns it, so nothing replaces the machine here: its kubelet registers the node again only when it restarts; replace the machine from its node pool"

// replaceFailed reports a replacement that did not happen, in the condition and
// once per distinct error in a ReplaceFailed Event. A control-plane node, a node
// whose startup taint is gone and a node nodeready verified before are never
// replaced (for good); any other error (a refused deletion, the NodeClaim resource
// not served) is tried again each round.
func (a *Agent) replaceFailed(ctx context.Context, log zerolog.Logger, err error, problems []string) {
	final := errors.Is(err, nodepatch.ErrControlPlane) || errors.Is(err, nodepatch.ErrNotHeld) || errors.Is(err, nodepatch.ErrVerifiedBefore)
	ev := log.Warn()
	if errors.Is(err, nodepatch.ErrForbidden) || errors.Is(err, nodepatch.ErrControlPlane) {
		ev = log.Error()
	}
	if final {
		a.replaced = true // nothing to try again
		ev.Err(err).Msg("Not replacing node, it stays tainted while checks fail")
	} else {
		ev.Err(err).Msg("Could not replace node, will try again")
	}
	if errors.Is(err, nodepatch.ErrNotHeld) {
		a.held = false
	}
	if msg := err.Error(); msg != a.replaceErr {
		a.replaceErr = msg
		a.events.Eventf(wellknown.ReplaceFailed, "Not replacing node: %s; checks still fail: %s", msg, summary(problems))
	}
	a.condition.Set(ctx, log, a.problemCondition(problems, nil))
}

// retaint puts the startup taint back on a node whose label was removed
// (REVERIFY_TAINT), before its checks run again. nodepatch does so only on a
// node that carries nodeready's completion record: a node that predates the
// install has neither label nor taint either, and is never tainted.
func (a *Agent) retaint(ctx context.Context) {
	tainted, err := a.write.Taint(ctx)
	switch {
	case err != nil:
		a.log.Warn().Err(err).Msg("Could not put the startup taint back for re-verification")
	case tainted:
		a.held = true
		a.log.Info().Str("taint", a.taint()).Msg("Put the startup taint back for re-verification")
		a.events.Eventf(wellknown.Reverifying, "Put the startup taint %s back while the node is verified again", a.taint())
		a.condition.Set(ctx, a.log, wellknown.Condition{Status: corev1.ConditionFalse, Reason: wellknown.Verifying, Message: "Verifying the node again"})
	}
}

// summary joins the problems for a condition or Event message. The
// recorder and nodepatch.SetCondition bound the length, whatever is added to it.
func summary(problems []string) string { return strings.Join(problems, "; ") }
