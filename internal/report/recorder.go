package report

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"

	"github.com/nodeready/nodeready/internal/wellknown"
)

// flushBudget bounds the wait at exit for Events still on their way; an
// Event that matters (reasons.go) has up to its mustSendBudget (budget.go)
// instead.
const flushBudget = 2 * time.Second

// mustSendBackoff paces those of an Event that matters, which are tried
// until its mustSendBudget runs out: a burst of new nodes can keep the API
// server answering 429 for longer than sendBackoff's five tries, and
// client-go's own next try comes only ten seconds later. Past the cap, the
// delay stays at the cap.
var mustSendBackoff = wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 5, Cap: 2 * time.Second}

// newRecorder returns a recorder of events.k8s.io Events about the node and
// its shutdown, to be called when the agent ends.
//
// It keeps client-go's recorder, which writes from goroutines of its own and
// aggregates a repeated Event into a series, and adds what the agent needs
// of it. client-go's aggregation key leaves out the note, so one broadcaster
// would store only the first of several failing checks; here each subject
// (what a note is about, see subjectOf) has a broadcaster of its own, so
// each check gets its Event and the same check failing again is counted
// into it. Every note is cut to wellknown.MaxMessage. And the shutdown waits, bounded,
// until every Event is written, so an Event that matters is not lost to the
// process ending; one that cannot be written is logged.
//
// budget is the time an Event that matters has from its emission to be
// written (mustSendBudget).
func newRecorder(client kubernetes.Interface, log zerolog.Logger, budget time.Duration) (events.EventRecorder, func()) {
	if client == nil {
		return &events.FakeRecorder{}, nil
	}
	r := &recorder{
		sink:     &events.EventSinkImpl{Interface: client.EventsV1()},
		log:      log,
		stop:     make(chan struct{}),
		mustSend: budget,
		backoff:  mustSendBackoff,
		subjects: map[string]events.EventBroadcaster{},
		recs:     map[string]events.EventRecorder{},
		pending:  map[sendKey]*sendState{},
	}
	return r, func() {
		r.flush()
		r.mu.Lock()
		for _, b := range r.subjects {
			b.Shutdown()
		}
		r.mu.Unlock()
		close(r.stop)
	}
}

// recorder routes each Event to the broadcaster of its subject and tracks
// whether it was written.
type recorder struct {
	sink events.EventSink
	log  zerolog.Logger
	// stop ends the broadcasters at the shutdown; they are started one per
	// subject as Events come, so each gets a context from it then.
	stop chan struct{}
	// mustSend is the time an Event that matters has from its emission to
	// be written; backoff paces its writes (mustSendBackoff).
	mustSend time.Duration
	backoff  wait.Backoff

	mu       sync.Mutex
	subjects map[string]events.EventBroadcaster
	recs     map[string]events.EventRecorder
	pending  map[sendKey]*sendState
}

// sendKey names the Events that client-go aggregates into one.
type sendKey struct{ reason, subject string }

// sendState counts the Events of one key handed to client-go and those
// written (or given up).
type sendState struct {
	// counted: emissions client-go only adds to a series' count in memory.
	emitted, settled, counted int
	last                      time.Time // of the last emission
	err                       error     // of the last failed write
}

func (r *recorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	note = wellknown.Truncate(fmt.Sprintf(note, args...), wellknown.MaxMessage)
	r.mu.Lock()
	subject := withoutAddresses(note)
	if _, ok := r.recs[subject]; !ok && len(r.recs) >= maxSubjects {
		subject = subjectOf(note)
	}
	rec, ok := r.recs[subject]
	if !ok {
		b := events.NewBroadcaster(&trackingSink{EventSink: r.sink, r: r, subject: subject})
		if err := b.StartRecordingToSinkWithContext(wait.ContextForChannel(r.stop)); err != nil {
			r.mu.Unlock()
			r.log.Error().Err(err).Str("reason", reason).Msg("Could not send Event")
			return
		}
		rec = b.NewRecorder(scheme.Scheme, wellknown.AgentController)
		r.subjects[subject], r.recs[subject] = b, rec
	}
	s := r.state(sendKey{reason, subject})
	s.emitted++
	s.last = time.Now()
	if s.emitted > 2 {
		// client-go writes the first Event and the series its second makes; from the
		// third on it only counts in memory, until its next series heartbeat.
		s.counted++
	}
	r.mu.Unlock()
	rec.Eventf(regarding, related, eventtype, reason, action, "%s", note)
}

// state returns the state of key; r.mu is held.
func (r *recorder) state(key sendKey) *sendState {
	s, ok := r.pending[key]
	if !ok {
		s = &sendState{}
		r.pending[key] = s
	}
	return s
}

// settle records the outcome of a write: every Event of the key handed over
// so far is stored (a series carries their count), or given up.
// A loss is logged before it counts as settled, so it is logged before the
// shutdown returns.
func (r *recorder) settle(key sendKey, err error) {
	if err != nil {
		r.lost(key, err)
	}
	r.mu.Lock()
	s := r.state(key)
	s.settled, s.err = s.emitted, err
	r.mu.Unlock()
}

// lost logs an Event that will not be written.
func (r *recorder) lost(key sendKey, err error) {
	ev := r.log.Warn()
	if matters(key.reason) {
		ev = r.log.Error()
	}
	ev.Err(err).Str("reason", key.reason).Str("subject", key.subject).Msg("Could not send Event")
}

// deadline returns until when the Events of key are waited for: for an
// Event that matters, r.mustSend from its last emission.
func (r *recorder) deadline(key sendKey) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state(key).last.Add(r.mustSend)
}

// flush waits until every Event handed over is written or given up: up to
// flushBudget, and for an Event that matters up to r.mustSend from its
// emission. It logs the Events still unwritten then.
func (r *recorder) flush() {
	start := time.Now()
	unsent := func(now time.Time) (waiting bool, late []sendKey) {
		r.mu.Lock()
		defer r.mu.Unlock()
		for key, s := range r.pending {
			if s.settled+s.counted >= s.emitted {
				continue
			}
			deadline := start.Add(flushBudget)
			if matters(key.reason) {
				deadline = later(deadline, s.last.Add(r.mustSend))
			}
			if now.Before(deadline) {
				waiting = true
			} else {
				late = append(late, key)
			}
		}
		return waiting, late
	}
	var late []sendKey
	_ = wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, flushBudget+r.mustSend, true,
		func(context.Context) (bool, error) {
			var waiting bool
			waiting, late = unsent(time.Now())
			return !waiting, nil
		})
	for _, key := range late {
		r.mu.Lock()
		err := r.pending[key].err
		r.mu.Unlock()
		if err == nil {
			err = errors.New("not written before exit")
		}
		r.lost(key, err)
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// maxSubjects bounds the broadcasters, each with goroutines of its own: one per distinct
// note (withoutAddresses), so that each distinct error is an Event of its own and the same
// error again is counted into its series; past the bound, notes share a broadcaster by
// subjectOf.
const maxSubjects = 32

// subjectOf returns what a note is about: the text before its first ": ",
// which for a failing check is the check and its target
// ("dns kubernetes.default.svc.cluster.local"), or else the whole note.
func subjectOf(note string) string {
	subject, _, _ := strings.Cut(note, ": ")
	return subject
}

// address matches what makes the text of one error differ from one round to the next
// while the error stays the same: IP addresses, with their ports, and ports of their own
// (Go's DNS errors carry the ephemeral port a query was sent from: "read udp
// 10.244.1.5:43121->10.96.0.10:53: i/o timeout").
var address = regexp.MustCompile(`\[[0-9A-Fa-f:.]+(%[^\]]+)?\](:\d+)?|\b\d{1,3}(\.\d{1,3}){3}(:\d+)?\b|\b[0-9A-Fa-f]{0,4}(:[0-9A-Fa-f]{0,4}){2,7}\b|:\d{2,5}\b`)

// withoutAddresses is a note with its addresses and ports taken out: what one fault
// is told as, however its text varies. The Event keeps the note as it was.
func withoutAddresses(note string) string { return address.ReplaceAllString(note, "*") }
