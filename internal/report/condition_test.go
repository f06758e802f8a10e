package report

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodeready/nodeready/internal/wellknown"
)

// failingNode fails the next fails condition writes and records the others.
type failingNode struct {
	fails   int
	tries   int
	written []wellknown.Condition
}

func (n *failingNode) SetCondition(_ context.Context, c wellknown.Condition) (bool, error) {
	n.tries++
	if n.fails > 0 {
		n.fails--
		return false, errors.New("connection refused")
	}
	n.written = append(n.written, c)
	return true, nil
}

var (
	failing  = wellknown.Condition{Status: corev1.ConditionFalse, Reason: wellknown.ChecksFailed, Message: "dns: broken"}
	verified = wellknown.Condition{Status: corev1.ConditionTrue, Reason: wellknown.Verified, Message: "All 1 checks passed"}
)

// TestConditionOnceARound: a condition whose write fails is written again,
// once a round however often it is set or flushed, until it lands; the first
// failure is a warning, the write that lands says how many it took; a
// condition the node shows already is not written again.
func TestConditionOnceARound(t *testing.T) {
	node := &failingNode{fails: 2}
	var logs strings.Builder
	log := zerolog.New(&logs)
	w := NewConditionWriter(node)

	w.NextRound()
	w.Set(t.Context(), log, failing)
	w.Set(t.Context(), log, failing)
	assert.False(t, w.Flush(t.Context(), log))
	assert.Equal(t, 1, node.tries, "one write a round")

	w.NextRound()
	assert.False(t, w.Flush(t.Context(), log))
	w.NextRound()
	assert.True(t, w.Flush(t.Context(), log))
	assert.True(t, w.Flush(t.Context(), log), "nothing left")
	assert.Equal(t, []wellknown.Condition{failing}, node.written)
	assert.Equal(t, 1, strings.Count(logs.String(), `"level":"warn"`), logs.String())
	assert.Contains(t, logs.String(), `"attempts":3`)

	w.NextRound()
	w.Set(t.Context(), log, failing)
	assert.Equal(t, 3, node.tries, "the node shows it already")
}

// TestReleaseConditionTriedAtOnce: the release's condition replaces a pending
// one and is tried at once, also in a round whose write failed already.
func TestReleaseConditionTriedAtOnce(t *testing.T) {
	node := &failingNode{fails: 1}
	w := NewConditionWriter(node)
	w.NextRound()
	w.Set(t.Context(), zerolog.Nop(), failing)
	w.Replace(t.Context(), zerolog.Nop(), verified)
	assert.Equal(t, []wellknown.Condition{verified}, node.written)
	assert.True(t, w.Flush(t.Context(), zerolog.Nop()), "the failing one is gone")
}

// TestConditionWriteKeepsNothing: Write returns the error of a write that
// failed and keeps nothing to write again: the caller does not go on.
func TestConditionWriteKeepsNothing(t *testing.T) {
	node := &failingNode{fails: 2}
	w := NewConditionWriter(node)
	w.NextRound()
	w.Set(t.Context(), zerolog.Nop(), failing)
	require.Error(t, w.Write(t.Context(), verified))
	assert.True(t, w.Flush(t.Context(), zerolog.Nop()), "nothing pending")
	require.NoError(t, w.Write(t.Context(), verified))
	w.Set(t.Context(), zerolog.Nop(), verified)
	assert.Equal(t, []wellknown.Condition{verified}, node.written, "shown: not written twice")
}

// TestLastFlush: after the SIGTERM a pending condition gets one more try,
// also when a write failed in the last round; with none pending, nothing is
// written.
func TestLastFlush(t *testing.T) {
	node := &failingNode{fails: 1}
	w := NewConditionWriter(node)
	w.NextRound()
	w.Set(t.Context(), zerolog.Nop(), verified)
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // the SIGTERM
	w.LastFlush(ctx, zerolog.Nop())
	assert.Equal(t, []wellknown.Condition{verified}, node.written)
	w.LastFlush(ctx, zerolog.Nop())
	assert.Equal(t, 2, node.tries)
}
