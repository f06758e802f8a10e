package report

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/nodeready/nodeready/internal/wellknown"
)

// ConditionSetter writes the condition to the node: nodepatch.Patcher, or the
// agent's read-only writer that only logs it.
type ConditionSetter interface {
	SetCondition(ctx context.Context, c wellknown.Condition) (bool, error)
}

// ConditionWriter keeps the node's condition telling the latest story. The
// condition is what `kubectl describe node` and kube-state-metrics show, so
// a short API outage must not leave it telling an old one: a write that
// fails is kept and tried again until it lands or the process ends, at most
// once a round, so a refused or failing API costs one write a round.
type ConditionWriter struct {
	node ConditionSetter
	// round counts the rounds, and the waits for the SIGTERM, so far.
	round int
	// pending is a condition whose write failed.
	pending *pendingCondition
	// shown is the last condition written, so a round like the one before
	// writes nothing.
	shown wellknown.Condition
}

// pendingCondition is a condition not yet written, how often its write
// failed, and in which round it last did.
type pendingCondition struct {
	wellknown.Condition
	failures, failedIn int
}

// NewConditionWriter writes the condition through node.
func NewConditionWriter(node ConditionSetter) *ConditionWriter {
	return &ConditionWriter{node: node}
}

// NextRound begins a round (or a wait for the SIGTERM): a pending condition
// may be tried once more.
func (w *ConditionWriter) NextRound() { w.round++ }

// Set reports c on the node, unless it is what the node shows already. A
// write that fails is kept (Flush).
func (w *ConditionWriter) Set(ctx context.Context, log zerolog.Logger, c wellknown.Condition) {
	if w.pending == nil && w.shown == c {
		return
	}
	if w.pending != nil {
		w.pending.Condition = c
	} else {
		w.pending = &pendingCondition{Condition: c}
	}
	w.Flush(ctx, log)
}

// Current returns the condition the node shows, or will once a pending write lands.
func (w *ConditionWriter) Current() wellknown.Condition {
	if w.pending != nil {
		return w.pending.Condition
	}
	return w.shown
}

// Replace reports c in place of any pending condition, and tries it now even
// when a write failed this round: the release's condition.
func (w *ConditionWriter) Replace(ctx context.Context, log zerolog.Logger, c wellknown.Condition) {
	w.pending = nil
	w.Set(ctx, log, c)
}

// Write writes c at once in place of any pending condition and returns the
// write's error; a condition that failed is not kept. For a condition the
// next step waits for (TAINT_OWNER=external's release).
func (w *ConditionWriter) Write(ctx context.Context, c wellknown.Condition) error {
	w.pending = nil
	if _, err := w.node.SetCondition(ctx, c); err != nil {
		return err
	}
	w.shown = c
	return nil
}

// Wrote records c as what the node shows, written by another path than this
// writer's (the release writes its condition with its label, and takes it back
// when the release fails): a pending condition goes, and a later Set of
// something else writes it.
func (w *ConditionWriter) Wrote(c wellknown.Condition) {
	w.pending = nil
	w.shown = c
}

// Flush writes the pending condition, if any, and reports whether none is
// left. The first failure of a condition is a warning; the retries are
// logged at debug level.
func (w *ConditionWriter) Flush(ctx context.Context, log zerolog.Logger) bool {
	c := w.pending
	if c == nil {
		return true
	}
	if c.failures > 0 && c.failedIn == w.round {
		return false // a write failed this round already: the next round tries again
	}
	wrote, err := w.node.SetCondition(ctx, c.Condition)
	if err != nil {
		c.failedIn = w.round
		ev := log.Debug()
		if c.failures == 0 {
			ev = log.Warn()
		}
		c.failures++
		ev.Err(err).Str("reason", string(c.Reason)).Msg("Could not set node condition, will try again")
		return false
	}
	w.pending = nil
	w.shown = c.Condition
	ev := log.Debug()
	if c.failures > 0 {
		ev = log.Info().Int("attempts", c.failures+1)
	}
	if wrote {
		ev.Str("reason", string(c.Reason)).Msg("Set node condition")
	}
	return true
}

// LastFlush makes one last, bounded try at a pending condition after the
// SIGTERM, so the node does not keep telling an old story.
func (w *ConditionWriter) LastFlush(ctx context.Context, log zerolog.Logger) {
	if w.pending == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lastFlushBudget)
	defer cancel()
	w.NextRound()
	w.Flush(ctx, log)
}
