package report

import (
	"bytes"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodeready/nodeready/internal/config"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// TestMustSendBudgetFitsTheGracePeriod: the agent's recorder gives an Event
// that matters what the pod has left: emitted at the latest at the end of
// the release's budget, it is written or given up before the grace period
// ends, with the margin to spare, for every SETTLE_TIME the agent accepts.
func TestMustSendBudgetFitsTheGracePeriod(t *testing.T) {
	for _, tt := range []struct {
		settle, want time.Duration
	}{
		{settle: 0, want: 17 * time.Second},
		{settle: 2 * time.Second, want: 15 * time.Second}, // the default
		{settle: config.MaxSettleTime, want: 2 * time.Second},
	} {
		t.Run(tt.settle.String(), func(t *testing.T) {
			e, shutdown := NewEvents(eventsOf(fake.NewClientset()), "node-a", zerolog.Nop(), tt.settle)
			defer shutdown()
			r, ok := e.rec.(*recorder)
			require.True(t, ok)
			assert.Equal(t, tt.want, r.mustSend)
			assert.Positive(t, r.mustSend)
			assert.Equal(t, TerminationGracePeriod-exitMargin, ReleaseBudget(tt.settle)+r.mustSend,
				"the latest emission plus the budget ends at the margin")
		})
	}
}

// TestVerifiedEventOutlasts429s: a burst of new nodes keeps API Priority
// and Fairness answering 429; the Verified Event is answered so six times in
// a row, more than sendBackoff's five tries, and is still written within its
// budget before the shutdown returns, once.
func TestVerifiedEventOutlasts429s(t *testing.T) {
	client, sent := recordingClient()
	var attempts atomic.Int32
	client.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		if attempts.Add(1) <= 6 {
			return true, nil, apierrors.NewTooManyRequests("Too many requests, please try again later.", 1)
		}
		return false, nil, nil
	})
	var logs bytes.Buffer
	evs, shutdown := NewEvents(eventsOf(client), "node-a", zerolog.New(&logs), 2*time.Second)
	evs.Eventf(wellknown.Verified, "All 4 checks passed; released in 1s")
	shutdown()
	assert.Equal(t, []string{"All 4 checks passed; released in 1s"}, sent.notes("Verified"))
	assert.Equal(t, int32(7), attempts.Load())
	assert.NotContains(t, logs.String(), "Could not send Event")
}

// TestEventLostAtItsBudget: an Event that the API server keeps refusing with
// 429 is given up when its budget ends, and its loss is logged as an error.
func TestEventLostAtItsBudget(t *testing.T) {
	client, sent := recordingClient()
	var attempts atomic.Int32
	client.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		attempts.Add(1)
		return true, nil, apierrors.NewTooManyRequests("Too many requests, please try again later.", 1)
	})
	var logs bytes.Buffer
	rec, shutdown := newRecorder(eventsOf(client), zerolog.New(&logs), 300*time.Millisecond)
	rec.(*recorder).backoff = wait.Backoff{Duration: 5 * time.Millisecond, Factor: 2, Steps: 3, Cap: 20 * time.Millisecond}
	EventsTo(rec, "node-a").Eventf(wellknown.Verified, "All 4 checks passed; released in 1s")
	shutdown()
	assert.Empty(t, sent.notes("Verified"))
	assert.Greater(t, attempts.Load(), int32(5), "written again until its budget ends")
	assert.Contains(t, logs.String(), `"level":"error"`)
	assert.Contains(t, logs.String(), `"reason":"Verified"`)
	assert.Contains(t, logs.String(), `"message":"Could not send Event"`)
}
