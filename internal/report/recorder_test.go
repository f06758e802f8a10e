package report

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodeready/nodeready/internal/wellknown"
)

// sentEvents records the Events the fake API server stored, and how.
type sentEvents struct {
	mu      sync.Mutex
	created []*eventsv1.Event
	patched []string // names
}

func (s *sentEvents) notes(reason string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, e := range s.created {
		if e.Reason == reason {
			out = append(out, e.Note)
		}
	}
	return out
}

// eventsOf is the agent's EventClient of client.
func eventsOf(client kubernetes.Interface) EventClient {
	return client.EventsV1().Events(metav1.NamespaceDefault)
}

// recordingClient is a fake clientset that keeps the Events it stores.
func recordingClient() (*fake.Clientset, *sentEvents) {
	client := fake.NewClientset()
	sent := &sentEvents{}
	client.PrependReactor("create", "events", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sent.mu.Lock()
		defer sent.mu.Unlock()
		sent.created = append(sent.created, a.(k8stesting.CreateAction).GetObject().(*eventsv1.Event).DeepCopy())
		return false, nil, nil
	})
	client.PrependReactor("patch", "events", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sent.mu.Lock()
		defer sent.mu.Unlock()
		sent.patched = append(sent.patched, a.(k8stesting.PatchAction).GetName())
		return false, nil, nil
	})
	return client, sent
}

// syncBuffer is a log sink safe for the recorder's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 5*time.Second, time.Millisecond, what)
}

// TestShutdownWaitsForEvents: the Verified Event is emitted just before the
// process ends; the shutdown lets its write finish instead of dropping it.
func TestShutdownWaitsForEvents(t *testing.T) {
	client := fake.NewClientset()
	var created atomic.Int32
	client.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		time.Sleep(300 * time.Millisecond) // a slow API server
		created.Add(1)
		return false, nil, nil
	})
	evs, shutdown := NewEvents(eventsOf(client), "node-a", zerolog.Nop(), 2*time.Second)
	evs.Eventf(wellknown.Verified, "All checks passed")
	shutdown()
	assert.Equal(t, int32(1), created.Load(), "the Event was written before the shutdown returned")
}

// TestEventAnsweredWith429IsSentAgain: API Priority and Fairness answers a
// busy API server's requests with 429; the Event is written again, before
// the shutdown returns, instead of being dropped.
func TestEventAnsweredWith429IsSentAgain(t *testing.T) {
	client, sent := recordingClient()
	var attempts atomic.Int32
	client.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		if attempts.Add(1) == 1 {
			return true, nil, apierrors.NewTooManyRequests("Too many requests, please try again later.", 1)
		}
		return false, nil, nil
	})
	evs, shutdown := NewEvents(eventsOf(client), "node-a", zerolog.Nop(), 2*time.Second)
	evs.Eventf(wellknown.Verified, "All 4 checks passed; released in 1s")
	shutdown()
	assert.Equal(t, []string{"All 4 checks passed; released in 1s"}, sent.notes("Verified"))
	assert.Equal(t, int32(2), attempts.Load())
}

// TestCheckFailedPerCheck: client-go aggregates Events by reason, not by
// note; each failing check still gets an Event of its own, and the same
// check failing again is counted into its series.
func TestCheckFailedPerCheck(t *testing.T) {
	client, sent := recordingClient()
	var creates atomic.Int32
	allCreated := make(chan struct{})
	client.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		if creates.Add(1) == 3 {
			close(allCreated)
		}
		return false, nil, nil
	})
	evs, shutdown := NewEvents(eventsOf(client), "node-a", zerolog.Nop(), 2*time.Second)
	for _, note := range []string{
		"dns a.example: no such host",
		"tcp 10.0.0.1:443: connection refused",
		"http https://x:8443/healthz: status 503",
	} {
		evs.Eventf(wellknown.CheckFailed, "%s", note)
	}
	select { // the repeat comes after the first failures are stored, as between rounds
	case <-allCreated:
	case <-time.After(10 * time.Second): // fewer were stored; the assertions say which
	}
	evs.Eventf(wellknown.CheckFailed, "%s", "dns a.example: no such host")
	evs.Eventf(wellknown.CheckFailed, "%s", "dns a.example: i/o timeout")
	shutdown()
	assert.ElementsMatch(t, []string{
		"dns a.example: no such host",
		"tcp 10.0.0.1:443: connection refused",
		"http https://x:8443/healthz: status 503",
		"dns a.example: i/o timeout",
	}, sent.notes("CheckFailed"), "another error of the same check is an Event of its own")
	assert.Len(t, sent.patched, 1, "the repeated dns failure is counted into its series")
}

// TestDistinctErrorsAreEventsOfTheirOwn: notes that start alike (every ReleaseFailed note
// does) are still distinct Events, and a third repeat, which client-go only counts in
// memory, is not waited for at the shutdown nor logged as lost.
func TestDistinctErrorsAreEventsOfTheirOwn(t *testing.T) {
	client, sent := recordingClient()
	var logs syncBuffer
	evs, shutdown := NewEvents(eventsOf(client), "node-a", zerolog.New(&logs), 2*time.Second)
	const prefix = "Checks passed but the release failed (a misconfiguration, not a failed check; no failure action follows): "
	first, second := prefix+"patch node node-a: forbidden", prefix+`patch node node-a: failed calling webhook "x"`
	writes := func() int {
		sent.mu.Lock()
		defer sent.mu.Unlock()
		return len(sent.created) + len(sent.patched)
	}
	// As between rounds: each write lands before the next emission; the fourth and fifth
	// emissions write nothing.
	for i, note := range []string{first, second, first, first, first} {
		evs.Eventf(wellknown.ReleaseFailed, "%s", note)
		waitFor(t, "the write of emission "+strconv.Itoa(i+1), func() bool { return writes() >= min(i+1, 3) })
	}
	start := time.Now()
	shutdown()
	assert.Less(t, time.Since(start), flushBudget, "the shutdown waited for Events that client-go only counts")
	assert.ElementsMatch(t, []string{first, second}, sent.notes("ReleaseFailed"))
	assert.Len(t, sent.patched, 1, "the repeats of the first are one series")
	assert.NotContains(t, logs.String(), "Could not send Event")
}

// TestNoteWithinTheLimit: events.k8s.io/v1 refuses a note over 1024 bytes;
// every note is cut to fit, on a rune boundary.
func TestNoteWithinTheLimit(t *testing.T) {
	client, sent := recordingClient()
	evs, shutdown := NewEvents(eventsOf(client), "node-a", zerolog.Nop(), 2*time.Second)
	long := strings.Repeat("dns ünïcödé.example: no such host; ", 60)
	evs.Eventf(wellknown.FailedOpen, "Released after 30m with failing checks: %s; released in %s", long, "30m0s")
	shutdown()
	notes := sent.notes("FailedOpen")
	require.Len(t, notes, 1)
	assert.LessOrEqual(t, len(notes[0]), 1024)
	assert.True(t, utf8.ValidString(notes[0]))
	assert.True(t, strings.HasPrefix(notes[0], "Released after 30m with failing checks: dns ünïcödé.example"))
}

// TestLostEventIsLogged: an Event that matters and that the API server
// refuses is not lost silently.
func TestLostEventIsLogged(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(eventsv1.Resource("events"), "", assert.AnError)
	})
	var out bytes.Buffer
	evs, shutdown := NewEvents(eventsOf(client), "node-a", zerolog.New(&out), 2*time.Second)
	evs.Eventf(wellknown.ReplacingNode, "Deleted NodeClaim x because checks failed: dns a: no such host")
	shutdown()
	assert.Contains(t, out.String(), `"level":"error"`)
	assert.Contains(t, out.String(), `"reason":"ReplacingNode"`)
	assert.Contains(t, out.String(), `"message":"Could not send Event"`)
}

// TestEventOutlastsRetryAfter: a busy API server answers 429 with a
// Retry-After that client-go's REST client waits out before it sends the
// Event again; the shutdown right after the Verified Event waits for that
// instead of ending the process first.
func TestEventOutlastsRetryAfter(t *testing.T) {
	var posts, stored atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		if posts.Add(1) == 1 {
			w.Header().Set("Retry-After", "3")
			http.Error(w, "Too many requests, please try again later.", http.StatusTooManyRequests)
			return
		}
		stored.Add(1)
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", r.Header.Get("Content-Type")) // the Event as sent, as stored
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	evs, shutdown := NewEvents(eventsOf(client), "node-a", zerolog.Nop(), 2*time.Second)
	evs.Eventf(wellknown.Verified, "All 4 checks passed; released in 1s")
	shutdown()
	assert.Equal(t, int32(1), stored.Load(), "the Event was stored before the shutdown returned")
}

// TestOneFaultOneSeries: notes that differ only by addresses and ports (the ephemeral port
// of a DNS query, a peer's address) are one fault: one Event, whose series counts the
// repeats, its note the first one's, addresses and all. Another error is an Event of its own.
func TestOneFaultOneSeries(t *testing.T) {
	for _, notes := range [][]string{
		{`dns x: lookup x on 10.96.0.10:53: read udp 10.244.1.5:43121->10.96.0.10:53: i/o timeout`,
			`dns x: lookup x on 10.96.0.10:53: read udp 10.244.1.5:38807->10.96.0.10:53: i/o timeout`,
			`dns x: lookup x on 10.96.0.10:53: read udp 10.244.1.5:51003->10.96.0.10:53: i/o timeout`},
		{`podnetwork pods: cannot reach fd00:10:244::2 on real-node-0: dial udp [fd00:10:244::2]:53: i/o timeout`,
			`podnetwork pods: cannot reach fd00:10:244::7 on real-node-0: dial udp [fd00:10:244::7]:53: i/o timeout`},
	} {
		client, sent := recordingClient()
		evs, shutdown := NewEvents(eventsOf(client), "node-a", zerolog.Nop(), 2*time.Second)
		for i, note := range notes {
			evs.Eventf(wellknown.CheckFailed, "%s", note)
			waitFor(t, "the write of emission "+strconv.Itoa(i+1), func() bool {
				sent.mu.Lock()
				defer sent.mu.Unlock()
				return len(sent.created)+len(sent.patched) >= min(i+1, 2)
			})
		}
		shutdown()
		assert.Equal(t, notes[:1], sent.notes("CheckFailed"), "one Event")
		assert.Len(t, sent.patched, 1, "the repeats are its series")
	}
	assert.NotEqual(t, withoutAddresses(`dns x: lookup x: i/o timeout`), withoutAddresses(`dns x: lookup x: no such host`))
	assert.Equal(t, `command /bin/false: exit status 1`, withoutAddresses(`command /bin/false: exit status 1`), "no address, nothing taken out")
}

// testClock is a clock the test moves.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestRepeatsCountedIntoTheSeries: as client-go's recorder does, the first emission is
// created and the second makes it a series, patched; the third and later are counted into
// the series in memory, written by the series' heartbeat and, once the series is not
// observed for finishTime, by its last write, after which the next emission is a new Event.
func TestRepeatsCountedIntoTheSeries(t *testing.T) {
	client, sent := recordingClient()
	var mu sync.Mutex
	var patches []k8stesting.PatchAction
	client.PrependReactor("patch", "events", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		patches = append(patches, a.(k8stesting.PatchAction))
		return false, nil, nil
	})
	clock := &testClock{now: time.Date(2025, 1, 2, 3, 4, 5, 6000, time.UTC)}
	start := clock.Now()
	r := makeRecorder(eventsOf(client), zerolog.Nop(), 2*time.Second)
	r.now = clock.Now
	shutdown := r.start()
	defer shutdown()
	evs := EventsTo(r, "node-a")
	const note = "dns a.example: no such host"
	settled := func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.pending) == 0
	}
	count := func() int32 {
		r.mu.Lock()
		defer r.mu.Unlock()
		require.Len(t, r.series, 1)
		for _, ev := range r.series {
			if ev.Series != nil {
				return ev.Series.Count
			}
		}
		return 1
	}
	lastPatch := func() (k8stesting.PatchAction, int) {
		mu.Lock()
		defer mu.Unlock()
		require.NotEmpty(t, patches)
		return patches[len(patches)-1], len(patches)
	}
	seriesPatch := func(count int32, observed time.Time) string {
		return `{"series":{"count":` + strconv.Itoa(int(count)) + `,"lastObservedTime":"` +
			observed.UTC().Format("2006-01-02T15:04:05.000000Z07:00") + `"}}`
	}

	evs.Eventf(wellknown.CheckFailed, "%s", note)
	waitFor(t, "the first Event written", settled)
	require.Len(t, sent.notes("CheckFailed"), 1)
	sent.mu.Lock()
	first := sent.created[0]
	sent.mu.Unlock()

	clock.Add(time.Minute)
	evs.Eventf(wellknown.CheckFailed, "%s", note)
	waitFor(t, "the series written", settled)
	patch, n := lastPatch()
	assert.Equal(t, 1, n)
	assert.Equal(t, first.Name, patch.GetName())
	assert.Equal(t, types.StrategicMergePatchType, patch.GetPatchType())
	assert.JSONEq(t, seriesPatch(2, start.Add(time.Minute)), string(patch.GetPatch()))
	// client-go's patch of a series (createPatchBytesForSeries) is the same.
	withSeries := first.DeepCopy()
	withSeries.Series = &eventsv1.EventSeries{Count: 2, LastObservedTime: metav1.MicroTime{Time: start.Add(time.Minute)}}
	oldData, err := json.Marshal(first)
	require.NoError(t, err)
	newData, err := json.Marshal(withSeries)
	require.NoError(t, err)
	clientGoPatch, err := strategicpatch.CreateTwoWayMergePatch(oldData, newData, eventsv1.Event{})
	require.NoError(t, err)
	assert.JSONEq(t, string(clientGoPatch), string(patch.GetPatch()))

	for range 3 {
		clock.Add(time.Minute)
		evs.Eventf(wellknown.CheckFailed, "%s", note)
	}
	assert.True(t, settled(), "the third and later emissions hand nothing over to be written")
	assert.Equal(t, int32(5), count(), "they are counted into the series")

	r.refreshSeries()
	patch, n = lastPatch()
	assert.Equal(t, 2, n, "the heartbeat writes the series")
	assert.Equal(t, first.Name, patch.GetName())
	assert.JSONEq(t, seriesPatch(5, start.Add(4*time.Minute)), string(patch.GetPatch()))

	clock.Add(time.Minute)
	evs.Eventf(wellknown.CheckFailed, "%s", note)
	assert.Equal(t, int32(6), count())
	r.finishSeries()
	_, n = lastPatch()
	assert.Equal(t, 2, n, "a series observed within finishTime goes on")

	clock.Add(finishTime + time.Second)
	r.finishSeries()
	patch, n = lastPatch()
	assert.Equal(t, 3, n, "a series not observed for finishTime is written a last time")
	assert.JSONEq(t, seriesPatch(6, start.Add(5*time.Minute)), string(patch.GetPatch()))
	r.mu.Lock()
	assert.Empty(t, r.series, "and let go")
	assert.Empty(t, r.subjects)
	r.mu.Unlock()

	evs.Eventf(wellknown.CheckFailed, "%s", note)
	waitFor(t, "the next Event written", settled)
	require.Equal(t, []string{note, note}, sent.notes("CheckFailed"), "the next emission is a new Event")
	sent.mu.Lock()
	assert.NotEqual(t, first.Name, sent.created[1].Name)
	assert.Nil(t, sent.created[1].Series)
	sent.mu.Unlock()
	_, n = lastPatch()
	assert.Equal(t, 3, n)

	// An Event not repeated within finishTime is let go without a write.
	clock.Add(finishTime + time.Second)
	r.finishSeries()
	r.mu.Lock()
	assert.Empty(t, r.series)
	r.mu.Unlock()
	_, n = lastPatch()
	assert.Equal(t, 3, n)
}
