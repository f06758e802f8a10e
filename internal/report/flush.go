package report

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// flushBudget bounds the wait at exit for Events still on their way; an
// Event that matters (reasons.go) has up to its mustSendBudget (budget.go)
// instead.
const flushBudget = 2 * time.Second

// sendState tracks the writes of emissions of one key under way. An
// emission only counted into a series in memory is no write of its own: it
// is written with the series' next write, or lost with the process, and is
// not waited for.
type sendState struct {
	writing int       // writes handed over, not yet written nor given up
	last    time.Time // the last emission handed over
	err     error     // of the last failed write
}

// handOver records a write of an emission of key. r.mu is held.
func (r *recorder) handOver(key seriesKey) {
	s, ok := r.pending[key]
	if !ok {
		s = &sendState{}
		r.pending[key] = s
	}
	s.writing++
	s.last = time.Now()
}

// failed records the error of a write of key that is to be made again.
func (r *recorder) failed(key seriesKey, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.pending[key]; ok {
		s.err = err
	}
}

// settle records the outcome of a write of key: written, or given up. A
// loss is logged before the write counts as settled, so it is logged before
// the shutdown returns; once the shutdown has logged the writes still under
// way, it is not logged again.
func (r *recorder) settle(key seriesKey, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil && !r.closed {
		r.lost(key, err)
	}
	s, ok := r.pending[key]
	if !ok {
		return
	}
	if err != nil {
		s.err = err
	}
	if s.writing--; s.writing <= 0 {
		delete(r.pending, key)
	}
}

// lost logs an Event that will not be written.
func (r *recorder) lost(key seriesKey, err error) {
	ev := r.log.Warn()
	if matters(key.reason) {
		ev = r.log.Error()
	}
	ev.Err(err).Str("reason", key.reason).Str("subject", key.subject).Msg("Could not send Event")
}

// deadline returns until when the writes of key are waited for: for an
// Event that matters, r.mustSend from its last emission. ok is false without
// a write of an emission of key under way.
func (r *recorder) deadline(key seriesKey) (deadline time.Time, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.pending[key]
	if !ok {
		return time.Time{}, false
	}
	return s.last.Add(r.mustSend), true
}

// flush waits until every write of an emission is made or given up: up to
// flushBudget, and for an Event that matters up to r.mustSend from its
// emission. It logs the Events still unwritten then; any emission from then
// on goes nowhere.
func (r *recorder) flush() {
	start := time.Now()
	waiting := func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		now := time.Now()
		for key, s := range r.pending {
			deadline := start.Add(flushBudget)
			if matters(key.reason) {
				deadline = later(deadline, s.last.Add(r.mustSend))
			}
			if now.Before(deadline) {
				return true
			}
		}
		return false
	}
	_ = wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, flushBudget+r.mustSend, true,
		func(context.Context) (bool, error) { return !waiting(), nil })
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	for key, s := range r.pending {
		err := s.err
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
