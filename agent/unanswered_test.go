package agent

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeready/nodeready/nodepatch"
)

// unanswered is how nodepatch reports a PATCH the API server did not answer
// in time: queued under load, it may be stored after the agent gave up.
var unanswered = fmt.Errorf("patch node node-a: %w: %w", nodepatch.ErrUnknownOutcome, context.DeadlineExceeded)

func (n *fakeNode) land() { n.mu.Lock(); n.landed = true; n.mu.Unlock() }

func (n *fakeNode) confirmed() int { n.mu.Lock(); defer n.mu.Unlock(); return n.confirms }

// TestUnansweredReleaseThatLanded: the PATCH got no answer but was stored.
// The agent finds that out and reports the release as usual: condition,
// Event, verified; never "fix the installation" nor a second write.
func TestUnansweredReleaseThatLanded(t *testing.T) {
	node := &fakeNode{landed: true}
	node.set(unanswered)
	a := testAgent(t, node, &fakeCheck{name: "dns"})
	var logs syncBuffer
	a.log = zerolog.New(&logs)
	cancel, done := runAgent(t, a)

	waitFor(t, "verified", a.verified.Load)
	cancel()
	require.NoError(t, <-done)
	assert.Equal(t, 1, node.count(), "one write")
	assert.Equal(t, 1, node.confirmed())
	assert.Equal(t, []string{nodepatch.ReasonVerified}, node.reasons())
	evs := drain(recorder(a))
	require.Len(t, evs, 1)
	assert.Contains(t, evs[0], "Normal Verified")
	assert.Equal(t, 1.0, testutil.ToFloat64(a.metrics.patches.WithLabelValues("patched")))
	assert.Contains(t, logs.String(), "Verified node")
	assert.NotContains(t, logs.String(), "fix the installation")
	assert.NotContains(t, logs.String(), "Aborted")
}

// TestUnansweredReleaseThatDidNotLand: the PATCH got no answer and the node
// shows it was not stored. That is the API server's trouble, not a
// misconfiguration: no ReleaseFailed Event, no failure recorded however
// many rounds it takes, and the release is tried again each round.
func TestUnansweredReleaseThatDidNotLand(t *testing.T) {
	node := &fakeNode{}
	node.set(unanswered)
	a := testAgent(t, node, &fakeCheck{name: "dns"})
	a.cfg.MaxRetries = 1
	var logs syncBuffer
	a.log = zerolog.New(&logs)
	_, _ = runAgent(t, a)

	waitFor(t, "release tried again", func() bool { return node.count() >= 3 })
	assert.False(t, a.verified.Load())
	assert.GreaterOrEqual(t, node.confirmed(), 2, "each write that got no answer is looked for")
	assert.Zero(t, testutil.ToFloat64(a.metrics.failures), "not a failed verification")
	assert.Empty(t, node.reasons(), "no condition: nothing is wrong with the node or the installation")
	assert.Empty(t, eventsWith(recorder(a), "Warning"))
	assert.Contains(t, logs.String(), "Could not release node, will try again")
	assert.NotContains(t, logs.String(), "fix the installation")

	node.set(nil) // the API server answers again
	waitFor(t, "released", a.verified.Load)
	assert.Equal(t, []string{nodepatch.ReasonVerified}, node.reasons())
}

// TestUnansweredReleaseLandsLater: the PATCH got no answer and the node did
// not show it yet, so the round failed; then the write is stored, and its
// label brings the SIGTERM while the agent waits for its next round. The
// agent reports the release instead of an abort; without the write landing,
// the SIGTERM is an abort as before.
func TestUnansweredReleaseLandsLater(t *testing.T) {
	for _, landed := range []bool{true, false} {
		t.Run(fmt.Sprintf("landed=%t", landed), func(t *testing.T) {
			node := &fakeNode{}
			node.set(unanswered)
			a := testAgent(t, node, &fakeCheck{name: "dns"})
			a.cfg.RetryBackoffBase, a.cfg.RetryBackoffMax = time.Hour, time.Hour
			var logs syncBuffer
			a.log = zerolog.New(&logs)
			cancel, done := runAgent(t, a)

			waitFor(t, "first release looked for", func() bool { return node.confirmed() == 1 })
			if landed {
				node.land()
			}
			cancel() // the SIGTERM
			require.NoError(t, <-done)
			assert.Equal(t, 1, node.count(), "no write after the SIGTERM")
			assert.Equal(t, 2, node.confirmed(), "looked for once more at the SIGTERM")
			evs := drain(recorder(a))
			if !landed {
				assert.False(t, a.verified.Load())
				assert.Empty(t, node.reasons())
				assert.Empty(t, evs)
				assert.Contains(t, logs.String(), "Aborted verification, node left as it was")
				return
			}
			assert.True(t, a.verified.Load())
			assert.Equal(t, []string{nodepatch.ReasonVerified}, node.reasons())
			require.Len(t, evs, 1)
			assert.True(t, strings.HasPrefix(evs[0], "Normal Verified"), evs[0])
			assert.Contains(t, logs.String(), "Verified node")
			assert.Contains(t, logs.String(), "Stopped after verification")
			assert.NotContains(t, logs.String(), "Aborted")
		})
	}
}
