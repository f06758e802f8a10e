package agent

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodeready/nodeready/nodepatch"
)

// maxMessage keeps a condition or Event message readable in kubectl.
const maxMessage = 1024

// recordFailure records, once, that the retries or the initial timeout ran
// out: an Error log line with every failing check, a CheckFailed Event per
// failing check, a VerificationFailed Event naming the failure action, and
// the condition.
func (a *Agent) recordFailure(ctx context.Context, log zerolog.Logger, round int, problems []string) {
	a.failed = true
	a.metrics.failures.Inc()
	log.Error().Strs("failing", problems).Str("action", a.cfg.FailureAction).Dur("retry_interval", a.cfg.RetryBackoffMax).
		Msg("Verification failed, node stays tainted")
	for _, p := range problems {
		a.events.Eventf(a.nodeRef, nil, corev1.EventTypeWarning, "CheckFailed", "Verify", "%s", truncate(p))
	}
	a.events.Eventf(a.nodeRef, nil, corev1.EventTypeWarning, "VerificationFailed", "Verify",
		"%d of the checks still failing after %d rounds and %s; node stays tainted; failure action: %s",
		len(problems), round, time.Since(a.started).Round(time.Second), a.cfg.FailureAction)
	a.setCondition(ctx, log, nodepatch.Condition{Status: corev1.ConditionFalse, Reason: nodepatch.ReasonChecksFailed, Message: summary(problems)})
}

// act carries out FAILURE_ACTION after a recorded failure. It returns true
// when the node was released (fail-open). It never runs on an abort: verify
// calls it only while ctx is live.
func (a *Agent) act(ctx context.Context, log zerolog.Logger, problems []string) bool {
	switch a.cfg.FailureAction {
	case FailOpen:
		if time.Since(a.started) < a.cfg.FailOpenAfter {
			return false
		}
		msg := fmt.Sprintf("Released after %s with failing checks: %s", a.cfg.FailOpenAfter, summary(problems))
		log.Warn().Strs("failing", problems).Msg("Failing open")
		err := a.release(ctx, log, nodepatch.Condition{Status: corev1.ConditionFalse, Reason: nodepatch.ReasonFailedOpen, Message: truncate(msg)},
			corev1.EventTypeWarning, "FailedOpen")
		return err == nil
	case ReplaceNode:
		if a.replaced {
			return false
		}
		a.setCondition(ctx, log, nodepatch.Condition{Status: corev1.ConditionFalse, Reason: nodepatch.ReasonReplacing, Message: summary(problems)})
		what, err := a.node.Replace(ctx, a.dynamic)
		if err != nil {
			log.Error().Err(err).Msg("Could not replace node, will try again")
			a.events.Eventf(a.nodeRef, nil, corev1.EventTypeWarning, "ReplaceFailed", "Replace", "%s", truncate(err.Error()))
			return false
		}
		a.replaced = true
		log.Warn().Str("deleted", what).Msg("Replacing node")
		a.events.Eventf(a.nodeRef, nil, corev1.EventTypeWarning, "ReplacingNode", "Replace", "Deleted %s because checks failed: %s", what, summary(problems))
	}
	return false
}

// retaint puts the startup taint back on a node whose label was removed
// (REVERIFY_TAINT), before its checks run again.
func (a *Agent) retaint(ctx context.Context) {
	tainted, err := a.node.Taint(ctx)
	switch {
	case err != nil:
		a.log.Warn().Err(err).Msg("Could not put the startup taint back for re-verification")
	case tainted:
		a.log.Info().Str("taint", a.taint()).Msg("Put the startup taint back for re-verification")
		a.events.Eventf(a.nodeRef, nil, corev1.EventTypeNormal, "Reverifying", "Taint", "Put the startup taint %s back while the node is verified again", a.taint())
		a.setCondition(ctx, a.log, nodepatch.Condition{Status: corev1.ConditionFalse, Reason: nodepatch.ReasonVerifying, Message: "Verifying the node again"})
	}
}

// summary joins the problems for a condition or Event message.
func summary(problems []string) string { return truncate(strings.Join(problems, "; ")) }

func truncate(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	return s[:maxMessage-3] + "..."
}
