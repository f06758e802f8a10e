package agent

import (
	"errors"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeready/nodeready/internal/config"
	"github.com/nodeready/nodeready/internal/wellknown"
	"github.com/nodeready/nodeready/nodepatch"
)

// The agent is a state machine: each round of checks ends in a result, decide
// turns the state and the result into the next state and what to carry out,
// and the agent carries it out and tells it (tell.go). decide and the other
// methods of state here are pure, so the failure policy is tested as a table
// of transitions (state_test.go); the tests through New prove the wiring.

// state is what the agent knows of its node and has done to it.
type state struct {
	// observed: the node's state was read once it was registered. held: it
	// carried the startup taint then (or the agent put it back for a
	// re-verification). Only a held node is ever failed open or replaced.
	observed, held bool
	// failed: the failure was recorded, once the retries or the initial timeout
	// ran out with problems.
	failed bool
	// replaced: the replacement ran, or can never run (a final refusal).
	replaced bool
	// deleting: the node's NodeClaim or Node was deleted, which the condition
	// says from then on.
	deleting bool
	// withheld says why the failure action due was not carried out: the fleet
	// shows no evidence that the fault is the node's own (fleet.go); "" when none
	// was withheld.
	withheld string
}

// verdict is what a round ended in.
type verdict int

const (
	// aborted: the SIGTERM came during the checks; nothing is recorded.
	aborted verdict = iota
	// released: every check passed and the release landed.
	released
	// waiting: nobody's fault. Karpenter has not registered the node, MIN_HOLD_TIME
	// runs, or the API server was away or busy when the release was written.
	waiting
	// problems: checks failed, or the release was refused; by whose fault, the
	// result's lists say.
	problems
)

// result is how a round ended.
type result struct {
	verdict verdict
	// failing are this node's problems, one per failing check: they may hold the
	// node and bring on the failure action.
	failing []string
	// misconfigured are the cluster's or the configuration's: a check no node
	// could pass, a refused release. They hold the node and never act.
	misconfigured []string
	// unattributed fail on this node by a fault whose owner it cannot tell
	// (checks.Unattributed): they hold the node and never act by themselves.
	unattributed []string
	// failingChecks and unattributedChecks name the checks of failing and
	// unattributed, each once: the evidence other agents read (fleet.go).
	failingChecks, unattributedChecks []string
}

// all lists the problems of the result, the node's first.
func (r result) all() []string { return slices.Concat(r.failing, r.unattributed, r.misconfigured) }

// holding lists the problems that fail on this node: its own and those whose owner
// it cannot tell.
func (r result) holding() []string { return slices.Concat(r.failing, r.unattributed) }

// policy is what the failure policy reads of the configuration.
type policy struct {
	action         string // FAILURE_ACTION
	maxRetries     int
	initialTimeout time.Duration
	failOpenAfter  time.Duration
}

func policyOf(c config.Config) policy {
	return policy{action: c.FailureAction, maxRetries: c.MaxRetries, initialTimeout: c.InitialTimeout, failOpenAfter: c.FailOpenAfter}
}

// decision is what a round's result brings.
type decision struct {
	next state
	// record: the failure is recorded now, once: its log line, the Events of the
	// failing checks and of the failure, and the condition.
	record bool
	// follow: the failure was recorded before; the condition and the Events follow
	// this round's problems.
	follow bool
	// act is the failure action to carry out now (config.FailOpen or
	// config.ReplaceNode), or "".
	act string
	// capped: the next round waits RETRY_BACKOFF_MAX, as every round after a
	// recorded failure.
	capped bool
}

// decide is the failure policy: after round (counted from 1), elapsed since the
// agent first started in its pod, with the round's result r. The failure is
// recorded once, after MAX_RETRIES rounds or INITIAL_TIMEOUT with problems.
// FAILURE_ACTION then applies to a node nodeready holds, when only the node is at
// fault: never for a misconfiguration, never on an abort, never to a node nodeready
// does not hold. With keep-tainted the rounds go on, so a node that heals is
// released without anyone restarting the pod.
func decide(s state, r result, round int, elapsed time.Duration, p policy) decision {
	d := decision{next: s}
	if r.verdict != problems {
		d.capped = s.failed
		return d
	}
	switch {
	case !s.failed && (round >= p.maxRetries || elapsed >= p.initialTimeout):
		d.record, d.next.failed = true, true
	case s.failed && !s.deleting:
		d.follow = true
	}
	d.capped = d.next.failed
	// Only the node's own failures may act; a misconfiguration or a failure whose
	// owner cannot be told beside them does not stop that, nor act by itself. Whether
	// the fault is really the node's alone, the fleet says before the action (fleet.go).
	if !d.next.failed || !s.held || s.deleting || len(r.failing) == 0 {
		return d
	}
	switch p.action {
	case config.FailOpen:
		if elapsed >= p.failOpenAfter {
			d.act = config.FailOpen
		}
	case config.ReplaceNode:
		if !s.replaced {
			d.act = config.ReplaceNode
		}
	}
	return d
}

// observedAs is the state once the node was read as n: a node is held when it
// carried the startup taint once it was registered. A Karpenter node gets its
// startup taint only at registration, so until then nothing is known.
func (s state) observedAs(n nodepatch.State) state {
	if !n.Registered {
		return s
	}
	s.observed, s.held = true, s.held || n.Tainted
	return s
}

// replacedWith is the state after a replacement that ended in err. A deletion
// happened: the node is being deleted. A control-plane node, a node whose startup
// taint is gone and a node nodeready verified before are never replaced, for good,
// and a node whose taint is gone is not held any more. Any other error (a refused
// deletion, the NodeClaim resource not served) is tried again the next round.
func (s state) replacedWith(err error) state {
	switch {
	case err == nil:
		s.replaced, s.deleting = true, true
	case errors.Is(err, nodepatch.ErrControlPlane), errors.Is(err, nodepatch.ErrVerifiedBefore):
		s.replaced = true
	case errors.Is(err, nodepatch.ErrNotHeld):
		s.replaced, s.held = true, false
	}
	return s
}

// actionText names the failure action that applies, or why none does, for the
// VerificationFailed Event: only a node nodeready holds is ever failed open or
// replaced, only for a check failing by the node's own fault (r.failing), and only
// with the fleet's evidence that the fault is not shared. A Karpenter node
// whose checks fail before Karpenter registered it is not known to be held yet:
// its agent starts before the registration, and the startup taint comes with it.
func (s state) actionText(p policy, r result) string {
	switch {
	case p.action == config.KeepTainted:
		return config.KeepTainted
	case !s.observed:
		return "none yet, the node's state is not known (a Karpenter node is read once Karpenter has registered it); " +
			p.action + " once it is known to be held"
	case !s.held:
		return "none, the node is not held by nodeready (it had no startup taint when the agent started)"
	case len(r.failing) == 0 && len(r.misconfigured) > 0:
		return "none while the installation is misconfigured (" + p.action + " once a check fails by this node's own fault)"
	case len(r.failing) == 0:
		return "none while no check fails by a fault this node can tell as its own (" + p.action + " once one does)"
	case s.withheld != "":
		return "none, " + p.action + " withheld: " + s.withheld
	default:
		return p.action
	}
}

// heldCondition is the condition of a round with problems before the failure is
// recorded: ChecksFailing while a check fails on this node and is retried,
// Misconfigured when only the cluster or the configuration stands in the way. It
// never releases the node.
func (s state) heldCondition(r result) wellknown.Condition {
	c := s.problemCondition(r, "")
	if c.Reason == wellknown.ChecksFailed {
		c.Reason = wellknown.ChecksFailing
	}
	return c
}

// problemCondition is the condition of a round with problems: ChecksFailed while a
// check fails on this node, Misconfigured when only the cluster or the configuration
// stands in the way, Replacing once the node is being deleted; with the reason the
// node was not replaced, when replace-node could not.
func (s state) problemCondition(r result, replaceErr string) wellknown.Condition {
	reason := wellknown.ChecksFailed
	switch {
	case s.deleting:
		reason = wellknown.Replacing
	case len(r.holding()) == 0:
		reason = wellknown.Misconfigured
	case s.withheld != "" && len(r.failing) > 0:
		reason = wellknown.SharedFault
	}
	msg := summary(r.all())
	switch {
	case s.deleting || len(r.failing) == 0:
	case s.withheld != "":
		msg += "; failure action withheld, the fault looks shared: " + s.withheld
	case replaceErr != "":
		msg += "; not replaced: " + replaceErr
	}
	return wellknown.Condition{Status: corev1.ConditionFalse, Reason: reason, Message: msg}
}
