package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodeready/nodeready/internal/config"
	"github.com/nodeready/nodeready/internal/wellknown"
	"github.com/nodeready/nodeready/nodepatch"
)

// carryOut carries out and tells decision d, made from round's result r, and
// reports whether the node was released (fail-open).
func (a *Agent) carryOut(ctx context.Context, log zerolog.Logger, d decision, r result, round int) bool {
	a.state = d.next
	if d.act != "" {
		// The fleet's evidence first: the condition and the Events of this round say
		// whether the action goes ahead or why it waits.
		a.state.withheld = a.fleet.judge(ctx, r.failingChecks)
		a.metrics.sharedFault(r.failingChecks, a.state.withheld != "")
		if a.state.withheld != "" {
			a.withhold(ctx, log, d.act)
			d.act = ""
		}
	}
	if d.record || d.follow {
		a.mark(ctx, log, r)
	}
	switch {
	case d.record:
		a.recordFailure(ctx, log, r, round)
	case r.verdict == problems && !a.state.failed:
		// Held from the first round with problems on: the condition says so and why,
		// not only once the failure is recorded. A round that passes writes nothing more.
		cond := a.state.heldCondition(r)
		now := a.condition.Current()
		if key := heldKey(cond, r); key != a.held || now.Reason != cond.Reason || now.Status != cond.Status {
			a.held = key
			a.tell(ctx, log, told{condition: &cond})
		}
	case d.follow:
		// The condition follows the latest round: checks that healed, others that
		// fail now, a release refused once the checks pass. Written only when it
		// changed. So do the Events: a check failing again is counted into the series
		// of its Event, one failing anew, or with another error, gets an Event of its own.
		cond := a.state.problemCondition(r, a.told.replace)
		a.tell(ctx, log, told{condition: &cond})
		a.checkFailed(r)
	}
	switch d.act {
	case config.FailOpen:
		return a.failOpen(ctx, log, r)
	case config.ReplaceNode:
		a.replace(ctx, log, r)
	}
	return false
}

// recordFailure tells, once, that the retries or the initial timeout ran out:
// an Error log line with every problem, a CheckFailed Event per failing check, a
// VerificationFailed Event naming the failure action (or why none applies), and
// the condition.
func (a *Agent) recordFailure(ctx context.Context, log zerolog.Logger, r result, round int) {
	a.metrics.failures.Inc()
	action := a.state.actionText(a.policy, r)
	a.checkFailed(r)
	cond := a.state.problemCondition(r, a.told.replace)
	a.tell(ctx, log, told{
		level: zerolog.ErrorLevel, msg: "Verification failed, node stays as it is",
		fields: map[string]any{"failing": r.failing, "misconfigured": r.misconfigured, "action": action, "retry_interval": a.cfg.RetryBackoffMax},
		reason: wellknown.VerificationFailed,
		note: fmt.Sprintf("%d of the checks still failing after %d rounds and %s; node stays as it is; failure action: %s",
			len(r.all()), round, time.Since(a.started).Round(time.Second), action),
		condition: &cond,
	})
}

// checkFailed emits a CheckFailed Event per check that failed on this node.
func (a *Agent) checkFailed(r result) {
	for _, p := range r.holding() {
		a.events.Eventf(wellknown.CheckFailed, "%s", p)
	}
}

// withhold tells, once per reason, that the failure action due waits for evidence
// from the fleet that the fault is the node's own: a Warning log line and a
// SharedFault Event (the condition follows the round).
func (a *Agent) withhold(ctx context.Context, log zerolog.Logger, action string) {
	// Told again when the reason changes, not its counts: the condition follows those.
	key := strings.Map(func(r rune) rune {
		if unicode.IsDigit(r) {
			return '#'
		}
		return r
	}, a.state.withheld)
	if a.told.shared == key {
		return
	}
	a.told.shared = key
	a.tell(ctx, log, told{
		level: zerolog.WarnLevel, msg: "Withheld the failure action, the fault looks shared",
		fields: map[string]any{"action": action, "why": a.state.withheld},
		reason: wellknown.SharedFault,
		note:   fmt.Sprintf("Not %s: the fault looks shared, no evidence from the fleet that it is this node's own: %s", actionDoing(action), a.state.withheld),
	})
}

// actionDoing names the failure action as what it does.
func actionDoing(action string) string {
	if action == config.FailOpen {
		return "failing open"
	}
	return "replacing the node"
}

// mark writes, while checks fail on a node nodeready holds and a failure action is
// set, the evidence the other agents read before theirs: the config label and the
// failing checks, on the own node. Only when it changed; a write that fails is
// logged and tried again with the next round: other agents then count this node
// less, never more.
func (a *Agent) mark(ctx context.Context, log zerolog.Logger, r result) {
	names := slices.Concat(r.failingChecks, r.unattributedChecks)
	if a.policy.action == config.KeepTainted || !a.state.held || a.state.deleting || len(names) == 0 {
		return
	}
	labels, annotations, changed := a.fleet.mark(names, time.Now())
	if !changed {
		return
	}
	if _, err := a.write.Mark(ctx, labels, annotations); err != nil {
		log.Warn().Err(err).Msg("Could not record the failing checks on the node for the fleet's evidence, will try again")
		return
	}
	a.fleet.marked = labels[wellknown.ConfigLabel(a.cfg.VerifiedLabel)] + " " + annotations[wellknown.FailingAnnotation(a.cfg.VerifiedLabel)]
}

// failOpen releases a node whose checks still fail, FAIL_OPEN_AFTER after the
// agent first started, with the label saying so.
func (a *Agent) failOpen(ctx context.Context, log zerolog.Logger, r result) bool {
	msg := fmt.Sprintf("Released after %s with failing checks: %s", a.cfg.FailOpenAfter, summary(r.failing))
	log.Warn().Strs("failing", r.failing).Msg("Failing open")
	return a.release(ctx, log, wellknown.Condition{Status: corev1.ConditionFalse, Reason: wellknown.FailedOpen, Message: msg}) == nil
}

// replace deletes the node's Karpenter NodeClaim, else the Node, and tells it; a
// replacement that did not happen is told too.
func (a *Agent) replace(ctx context.Context, log zerolog.Logger, r result) {
	what, err := a.write.Replace(ctx, a.dynamic)
	a.state = a.state.replacedWith(err)
	if err != nil {
		a.replaceFailed(ctx, log, err, r)
		return
	}
	note := fmt.Sprintf("Deleted %s because checks failed: %s", what, summary(r.failing))
	if strings.HasPrefix(what, "Node ") {
		note += "; " + withoutNodeClaim
	}
	cond := a.state.problemCondition(result{failing: r.failing}, "")
	a.tell(ctx, log, told{level: zerolog.WarnLevel, msg: "Replacing node", fields: map[string]any{"deleted": what},
		reason: wellknown.ReplacingNode, note: note, condition: &cond})
}

// withoutNodeClaim says what deleting a Node object does where no Karpenter NodeClaim owns
// it: the kubelet registers its node only when it starts, so the machine runs on outside the
// cluster until something on the infrastructure's side replaces it.
const withoutNodeClaim = "no Karpenter NodeClaim owns it, so nothing replaces the machine here: its kubelet registers the node again only when it restarts; replace the machine from its node pool"

// replaceFailed tells a replacement that did not happen, in the log, the condition
// and, once per distinct error, a ReplaceFailed Event. Whether it is tried again,
// replacedWith decided.
func (a *Agent) replaceFailed(ctx context.Context, log zerolog.Logger, err error, r result) {
	level := zerolog.WarnLevel
	if errors.Is(err, nodepatch.ErrForbidden) || errors.Is(err, nodepatch.ErrControlPlane) {
		level = zerolog.ErrorLevel
	}
	msg := "Could not replace node, will try again"
	if a.state.replaced {
		msg = "Not replacing node, it stays tainted while checks fail"
	}
	t := told{level: level, msg: msg, fields: map[string]any{"error": err}}
	if text := err.Error(); text != a.told.replace {
		a.told.replace = text
		t.reason = wellknown.ReplaceFailed
		t.note = fmt.Sprintf("Not replacing node: %s; checks still fail: %s", text, summary(r.failing))
	}
	cond := a.state.problemCondition(result{failing: r.failing}, a.told.replace)
	t.condition = &cond
	a.tell(ctx, log, t)
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
		a.state.held = true
		a.tell(ctx, a.log, told{
			level: zerolog.InfoLevel, msg: "Put the startup taint back for re-verification", fields: map[string]any{"taint": a.taint()},
			reason: wellknown.Reverifying, note: fmt.Sprintf("Put the startup taint %s back while the node is verified again", a.taint()),
			condition: &wellknown.Condition{Status: corev1.ConditionFalse, Reason: wellknown.Verifying, Message: "Verifying the node again"},
		})
	}
}

// heldKey says what a held round's condition tells beyond its error texts: its reason
// and the checks it names, this node's, those of unknown owner and the misconfigured.
func heldKey(c wellknown.Condition, r result) string {
	named := func(problems []string) string {
		names := make([]string, 0, len(problems))
		for _, p := range problems {
			name, _, _ := strings.Cut(p, ":")
			names = append(names, name)
		}
		return strings.Join(names, ",")
	}
	return strings.Join([]string{string(c.Reason), string(c.Status), named(r.failing), named(r.unattributed), named(r.misconfigured)}, "|")
}
