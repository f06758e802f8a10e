package report

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeready/nodeready/internal/wellknown"
)

// client-go's timings of a series (k8s.io/client-go/tools/events): every
// refreshTime each series is written again, so that its Event does not
// expire on the API server while it goes on; every finishTime a series not
// observed for finishTime is written a last time, with its final count, and
// let go, as is an Event that was not repeated within finishTime, so that
// the next emission is an Event of its own.
const (
	refreshTime = 30 * time.Minute
	finishTime  = 6 * time.Minute
)

// newRecorder returns a recorder of events.k8s.io Events about the node and
// its shutdown, to be called when the agent ends.
//
// It writes the Events as client-go's recorder (k8s.io/client-go/tools/events)
// does, whose package would bring the typed clients of every API group into
// the agent, and adds what the agent needs of it. client-go's aggregation key
// leaves out the note, so it would store only the first of several failing
// checks; here the key holds the note's subject too (see keyOf), so each
// check gets its Event and the same check failing again is counted into it.
// Every note is cut to wellknown.MaxMessage. And the shutdown waits, bounded,
// until every Event is written, so an Event that matters is not lost to the
// process ending; one that cannot be written is logged. Then it stops the
// recorder's goroutines.
//
// budget is the time an Event that matters has from its emission to be
// written (mustSendBudget). Without a client the Events go nowhere and there
// is no shutdown.
func newRecorder(client EventClient, log zerolog.Logger, budget time.Duration) (EventRecorder, func()) {
	if client == nil {
		return discard{}, nil
	}
	r := makeRecorder(client, log, budget)
	return r, r.start()
}

// makeRecorder returns a recorder with client-go's timings, not yet started.
func makeRecorder(client EventClient, log zerolog.Logger, budget time.Duration) *recorder {
	// client-go's reportingInstance; without a hostname, it is the
	// controller and a dash.
	hostname, _ := os.Hostname()
	return &recorder{
		client:     client,
		log:        log,
		controller: wellknown.AgentController,
		instance:   wellknown.AgentController + "-" + hostname,
		mustSend:   budget,
		backoff:    mustSendBackoff,
		pause:      retryPause,
		refresh:    refreshTime,
		finish:     finishTime,
		now:        time.Now,
		series:     map[seriesKey]*eventsv1.Event{},
		subjects:   map[string]int{},
		pending:    map[seriesKey]*sendState{},
	}
}

// recorder aggregates the Events about the node into series and writes
// them.
type recorder struct {
	client EventClient
	log    zerolog.Logger
	// controller and instance are the Events' reportingController and
	// reportingInstance.
	controller, instance string
	// mustSend is the time an Event that matters has from its emission to
	// be written; backoff paces its writes (mustSendBackoff).
	mustSend time.Duration
	backoff  wait.Backoff
	// pause is the wait before an Event is written again (retryPause);
	// refresh and finish are the series' timings (refreshTime, finishTime);
	// now is the clock of the Events and their series.
	pause, refresh, finish time.Duration
	now                    func() time.Time

	// ctx ends the writes and the series' upkeep at the shutdown; wg waits
	// for their goroutines.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex
	// series holds, as client-go's cache does, the last Event created of
	// each key, or the series it became, until finishSeries lets it go: a
	// repeat is counted into it.
	series map[seriesKey]*eventsv1.Event
	// subjects counts the keys in series of each subject.
	subjects map[string]int
	// pending holds the keys with writes of emissions under way (flush.go).
	pending map[seriesKey]*sendState
	// closed: the shutdown has waited for the writes under way and logged
	// those it gave up; an emission from then on goes nowhere.
	closed bool
}

// seriesKey names the Events that are one series: those equal in what
// client-go's aggregation key holds (eventKey in k8s.io/client-go/tools/events)
// and of one subject.
type seriesKey struct {
	eventType, action, reason string
	reportingController       string
	reportingInstance         string
	regarding, related        corev1.ObjectReference
	subject                   string
}

// start starts the series' upkeep and returns the shutdown.
func (r *recorder) start() func() {
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.wg.Add(1)
	go r.keepSeries()
	return func() {
		r.flush()
		r.cancel()
		r.wg.Wait()
	}
}

func (r *recorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	note = wellknown.Truncate(fmt.Sprintf(note, args...), wellknown.MaxMessage)
	ev, err := r.makeEvent(regarding, related, eventtype, reason, action, note)
	if err != nil {
		r.log.Error().Err(err).Str("reason", reason).Msg("Could not send Event")
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	key := r.keyOf(ev)
	write := r.observe(key, ev)
	if write == nil {
		return
	}
	r.handOver(key)
	// As client-go does, the write is made by a goroutine of its own, so an
	// emission does not wait for the API server.
	r.wg.Add(1)
	go r.attempt(key, write)
}

// keyOf returns the key of ev. Its subject is the note without addresses,
// or, while series of maxSubjects subjects are kept, the note's subjectOf:
// however many distinct errors come, what is kept stays bounded. r.mu is
// held.
func (r *recorder) keyOf(ev *eventsv1.Event) seriesKey {
	subject := withoutAddresses(ev.Note)
	if r.subjects[subject] == 0 && len(r.subjects) >= maxSubjects {
		subject = subjectOf(ev.Note)
	}
	key := seriesKey{
		eventType:           ev.Type,
		action:              ev.Action,
		reason:              ev.Reason,
		reportingController: ev.ReportingController,
		reportingInstance:   ev.ReportingInstance,
		regarding:           ev.Regarding,
		subject:             subject,
	}
	if ev.Related != nil {
		key.related = *ev.Related
	}
	return key
}

// observe counts an emission of key, as client-go's recordToSink does, and
// returns what is to be written of it: the first is created; the second
// makes the Event a series, written by a patch of its count; from the third
// on the series' count grows in memory only, until the series is written
// again (refreshSeries, finishSeries), and nothing is written. r.mu is held.
func (r *recorder) observe(key seriesKey, ev *eventsv1.Event) *eventsv1.Event {
	cached, ok := r.series[key]
	if !ok {
		r.series[key] = ev
		r.subjects[key.subject]++
		return ev.DeepCopy()
	}
	now := metav1.MicroTime{Time: r.now()}
	if cached.Series != nil {
		cached.Series.Count++
		cached.Series.LastObservedTime = now
		return nil
	}
	cached.Series = &eventsv1.EventSeries{Count: 2, LastObservedTime: now}
	return cached.DeepCopy()
}

// drop lets the series of key go. r.mu is held.
func (r *recorder) drop(key seriesKey) {
	delete(r.series, key)
	if r.subjects[key.subject]--; r.subjects[key.subject] <= 0 {
		delete(r.subjects, key.subject)
	}
}

// keepSeries writes the series again every r.refresh and finishes them
// every r.finish, until the shutdown.
func (r *recorder) keepSeries() {
	defer r.wg.Done()
	refresh, finish := time.NewTicker(r.refresh), time.NewTicker(r.finish)
	defer refresh.Stop()
	defer finish.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-refresh.C:
			r.refreshSeries()
		case <-finish.C:
			r.finishSeries()
		}
	}
}

// cachedEvent is a copy of a series' Event, written without r.mu held so an
// emission does not wait for the API server.
type cachedEvent struct {
	key seriesKey
	ev  *eventsv1.Event
}

// refreshSeries writes every series again, with the count it has reached.
func (r *recorder) refreshSeries() {
	r.mu.Lock()
	var writes []cachedEvent
	for key, ev := range r.series {
		if ev.Series != nil {
			writes = append(writes, cachedEvent{key, ev.DeepCopy()})
		}
	}
	r.mu.Unlock()
	for _, w := range writes {
		r.rewrite(w.key, w.ev)
	}
}

// finishSeries writes a last time every series not observed for r.finish
// and lets it go, and lets go every Event not repeated within r.finish. A
// series whose write is to be tried again (final) is kept for the next pass,
// as client-go keeps it, and so is one observed again while it was written.
func (r *recorder) finishSeries() {
	cutoff := r.now().Add(-r.finish)
	r.mu.Lock()
	var writes []cachedEvent
	for key, ev := range r.series {
		switch {
		case ev.Series == nil:
			if ev.EventTime.Time.Before(cutoff) {
				r.drop(key)
			}
		case ev.Series.LastObservedTime.Time.Before(cutoff):
			writes = append(writes, cachedEvent{key, ev.DeepCopy()})
		}
	}
	r.mu.Unlock()
	for _, w := range writes {
		if r.rewrite(w.key, w.ev) {
			continue
		}
		r.mu.Lock()
		if ev, ok := r.series[w.key]; ok && ev.Name == w.ev.Name && ev.Series != nil && ev.Series.Count == w.ev.Series.Count {
			r.drop(w.key)
		}
		r.mu.Unlock()
	}
}

// discard drops every Event: the recorder without a client.
type discard struct{}

func (discard) Eventf(_, _ runtime.Object, _, _, _, _ string, _ ...any) {}

// maxSubjects bounds the subjects of the series kept: one per distinct note
// (withoutAddresses), so that each distinct error is an Event of its own and
// the same error again is counted into its series; past the bound, notes
// share series by subjectOf.
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
