package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodeready/nodeready/internal/report"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// noAnswer is what the client returns for a PATCH the API server did not answer in time:
// queued under load, it may be stored after the agent gave up.
var noAnswer = fmt.Errorf("Patch \"https://10.96.0.1/api/v1/nodes/node-a\": %w", context.DeadlineExceeded)

// unanswered makes the releases get no answer while the returned switch is on: with land,
// the API server stores each first; without, it keeps the last for land to store later.
type unanswered struct {
	c    *cluster
	on   atomic.Bool
	mu   sync.Mutex
	last k8stesting.Action
}

func answerless(c *cluster, land bool) *unanswered {
	u := &unanswered{c: c}
	u.on.Store(true)
	c.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if !u.on.Load() || a.GetSubresource() != "" {
			return false, nil, nil
		}
		if land {
			if _, err := c.apply(a); err != nil {
				return true, nil, err
			}
		}
		u.mu.Lock()
		u.last = a.DeepCopy()
		u.mu.Unlock()
		return true, nil, noAnswer
	})
	return u
}

// late stores the last release that got no answer, as an API server that queued it would,
// and returns its answer.
func (u *unanswered) late() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.last == nil {
		return errors.New("no release got no answer")
	}
	_, err := u.c.apply(u.last)
	return err
}

// assertTakenBack asserts that each Verified condition written by a release that did not
// land was followed by reason, and that the last is reason.
// takenBack returns the reasons the node's condition had, read once the last release was
// taken back (with reason): between a release's condition and its taking back, a release
// is in flight.
func takenBack(t *testing.T, c *cluster, reason wellknown.Reason) []string {
	t.Helper()
	var reasons []string
	waitFor(t, "the last release taken back", func() bool {
		reasons = c.reasons()
		return len(reasons) > 0 && reasons[len(reasons)-1] == string(reason)
	})
	return reasons
}

func assertTakenBack(t *testing.T, reasons []string, reason wellknown.Reason) {
	t.Helper()
	require.NotEmpty(t, reasons)
	for i, got := range reasons {
		want := string(wellknown.Verified)
		if i%2 == 1 {
			want = string(reason)
		}
		assert.Equal(t, want, got, "condition %d of %v", i, reasons)
	}
	assert.Equal(t, string(reason), reasons[len(reasons)-1], "the last condition of a node still held")
}

// TestUnansweredReleaseThatLanded: the PATCH got no answer but was stored. The agent finds
// that out and reports the release as usual: condition, Event, verified; never a
// ReleaseFailed Event nor a second write.
func TestUnansweredReleaseThatLanded(t *testing.T) {
	c := newCluster(heldNode())
	answerless(c, true)
	r := runNew(t, c, passing)

	waitFor(t, "verified", func() bool { return isVerified(r.Agent) })
	require.NoError(t, r.stop(t))
	assert.Equal(t, 1, c.requests("patch", ""), "one write")
	assert.Equal(t, []corev1.Taint{otherTaint}, c.node(t).Spec.Taints)
	assert.Equal(t, []string{string(wellknown.Verified)}, c.reasons())
	assert.Equal(t, []string{"Verified"}, c.eventReasons(t))
	assert.Equal(t, 1.0, patchesOf(r.Agent, "patched"))
	assert.Zero(t, patchesOf(r.Agent, "error"))
}

// TestUnansweredReleaseThatDidNotLand: the PATCH got no answer and the node shows it was
// not stored. That is the API server's trouble, not a misconfiguration: no ReleaseFailed
// Event, no failure recorded however many rounds it takes, and the release is tried again
// each round, each looked for on the node.
func TestUnansweredReleaseThatDidNotLand(t *testing.T) {
	c := newCluster(heldNode())
	u := answerless(c, false)
	r := runNew(t, c, passing, map[string]string{"MAX_RETRIES": "1"})

	waitFor(t, "release tried again", func() bool { return c.requests("patch", "") >= 3 })
	assert.False(t, isVerified(r.Agent))
	assert.Zero(t, failures(r.Agent), "a failed verification")
	// The condition goes with the label, and is taken back when the write did not land: the
	// node, held, never keeps saying Verified. Nothing is wrong with the node or the
	// installation: no Event.
	assertTakenBack(t, takenBack(t, c, wellknown.Verifying), wellknown.Verifying)
	assert.Empty(t, c.events(t))
	// The watch never shows the write landed, so each is looked for by a read, after the
	// informer's own first.
	assert.GreaterOrEqual(t, c.requests("get", ""), c.requests("patch", ""))

	u.on.Store(false) // the API server answers again
	waitFor(t, "released", func() bool { return isVerified(r.Agent) })
	require.NoError(t, r.stop(t))
	assert.Equal(t, string(wellknown.Verified), c.condition(t).Reason)
	assert.Equal(t, []string{"Verified"}, c.eventReasons(t))
}

// TestUnansweredReleaseLandsLater: the PATCH got no answer and the node did not show it yet,
// so the round failed and the agent took the release's condition back. The write, stored
// later, is refused by its own test of the condition: the node stays held and says so, never
// labelled with a condition that says otherwise. The SIGTERM then is an abort that leaves
// the node as it was, looked at once more in case the write landed.
func TestUnansweredReleaseLandsLater(t *testing.T) {
	for _, landed := range []bool{true, false} {
		t.Run(fmt.Sprintf("landed=%t", landed), func(t *testing.T) {
			c := newCluster(heldNode())
			u := answerless(c, false)
			r := runNew(t, c, passing, map[string]string{"RETRY_BACKOFF_BASE": "1h", "RETRY_BACKOFF_MAX": "1h"})

			// Counted once the write was looked for and the round gave up; the condition is
			// taken back after that.
			waitFor(t, "the release given up", func() bool { return patchesOf(r.Agent, "error") == 1 })
			waitFor(t, "the condition taken back", func() bool { return len(c.reasons()) == 2 })
			if landed {
				assert.Error(t, u.late(), "a late write landed over the condition taken back")
			}
			reads := c.requests("get", "")
			require.NoError(t, r.stop(t))
			assert.Equal(t, 1, c.requests("patch", ""), "a write after the SIGTERM")
			assert.Greater(t, c.requests("get", ""), reads, "not looked for at the SIGTERM")
			assert.False(t, isVerified(r.Agent))
			assert.Equal(t, heldNode().Spec.Taints, c.node(t).Spec.Taints)
			assert.NotContains(t, c.node(t).Labels, "node-ready/verified")
			// The next agent of the pod, which the node still matches, releases it.
			assert.Equal(t, []string{string(wellknown.Verified), string(wellknown.Verifying)}, c.reasons())
			assert.Empty(t, c.events(t))
		})
	}
}

// TestUnansweredReleaseSeenAtTheSIGTERM: the PATCH got no answer, the node could not be
// read, and the condition could not be taken back, so the write, stored later, landed: its
// label brought the SIGTERM. The agent's read of the node then waits for its turn on a
// loaded API server (429s, each retried after its Retry-After) until its time is up, while
// its watch of the node shows the label at once: the watch's answer counts, and the release
// is reported as usual, condition, Event and verified, not left unknown.
func TestUnansweredReleaseSeenAtTheSIGTERM(t *testing.T) {
	c := newCluster(heldNode())
	busy := apierrors.NewTooManyRequests("the API server is busy", 1)
	const (
		answering = iota
		busyReads // the round's read of a release with no answer
		stuckRead // the read at the SIGTERM: the late write lands meanwhile
	)
	var reads atomic.Int32
	released := make(chan struct{})
	t.Cleanup(func() { close(released) })
	var u *unanswered
	c.PrependReactor("get", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		switch reads.Load() {
		case busyReads:
			return true, nil, busy
		case stuckRead:
			if reads.CompareAndSwap(stuckRead, answering) {
				assert.NoError(t, u.late(), "the late write lands: the condition was not taken back")
				select {
				case <-released:
				case <-time.After(report.ReleaseBudget(0) + time.Second):
				}
				return true, nil, busy
			}
		}
		return false, nil, nil
	})
	// The release's condition lands; the taking back that follows gets no answer.
	var statusWrites atomic.Int32
	statusDown := &atomic.Bool{}
	statusDown.Store(true)
	c.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "status" || !statusDown.Load() || statusWrites.Add(1) == 1 {
			return false, nil, nil
		}
		return true, nil, noAnswer
	})
	u = answerless(c, false)
	c.onRelease(func() { reads.Store(busyReads) })
	r := runNew(t, c, passing, map[string]string{"RETRY_BACKOFF_BASE": "1h", "RETRY_BACKOFF_MAX": "1h"})

	waitFor(t, "the release given up", func() bool { return patchesOf(r.Agent, "error") == 1 })
	require.False(t, isVerified(r.Agent))
	statusDown.Store(false)
	reads.Store(stuckRead)
	require.NoError(t, r.stop(t))

	assert.True(t, isVerified(r.Agent), "the release that brought the SIGTERM is reported")
	assert.Equal(t, 1.0, patchesOf(r.Agent, "patched"))
	assert.Equal(t, 1, c.requests("patch", ""), "one write")
	assert.NotContains(t, c.node(t).Spec.Taints, startupTaint)
	assert.Equal(t, "true", c.node(t).Labels[wellknown.VerifiedLabel])
	assert.Equal(t, string(wellknown.Verified), c.condition(t).Reason)
	assert.Equal(t, []string{"Verified"}, c.eventReasons(t))
}

// TestTakingBackNeverOutlivesALateRelease: the release's write got no answer, the node could
// not be read, and the taking back of its condition could not be written either, so it
// waits for the next round. Meanwhile the write, stored late, landed: the node is released
// with the release's condition. The taking back, written again, must not land over it: it is
// written as the first was, fenced by a read of the node, which shows the release, so nothing
// is written and the next round reports the release. Never a node labelled with a condition
// that says it is not released (a 5000-node burst left 25 of them before).
func TestTakingBackNeverOutlivesALateRelease(t *testing.T) {
	c := newCluster(heldNode())
	var trouble atomic.Bool // reads and condition writes get no answer
	var refused atomic.Int32
	var mu sync.Mutex
	var release k8stesting.Action
	c.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		switch {
		case a.GetSubresource() == "" && release == nil:
			mu.Lock()
			release = a.DeepCopy()
			mu.Unlock()
			trouble.Store(true)
			return true, nil, noAnswer
		case a.GetSubresource() == "status" && trouble.Load():
			refused.Add(1)
			return true, nil, noAnswer
		}
		return false, nil, nil
	})
	c.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if trouble.Load() {
			refused.Add(1)
			return true, nil, noAnswer
		}
		return false, nil, nil
	})
	r := runNew(t, c, passing, map[string]string{"RETRY_BACKOFF_BASE": "200ms", "RETRY_BACKOFF_MAX": "200ms"})

	// The release looked for (a read) and taken back (a read, then the condition's write
	// again), all without an answer.
	waitFor(t, "the taking back failed", func() bool { return refused.Load() >= 3 })
	mu.Lock()
	_, err := c.apply(release)
	mu.Unlock()
	require.NoError(t, err, "the late write lands: the release's condition is still on the node")
	require.Contains(t, c.node(t).Labels, "node-ready/verified")
	trouble.Store(false)

	waitFor(t, "verified", func() bool { return isVerified(r.Agent) })
	require.NoError(t, r.stop(t))
	assert.Equal(t, string(wellknown.Verified), c.condition(t).Reason, "a released node's condition")
	assert.NotContains(t, c.reasons(), string(wellknown.Verifying), "a taking back written over the late release")
	assert.Equal(t, []string{"Verified"}, c.eventReasons(t))
}
