package kube

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// DateSample is one answer of the API server as this node's clock saw it: the
// response's Date header, and the local times at which its request was sent and
// its headers arrived. The server stamped Date at some moment between the two.
type DateSample struct {
	Date, Sent, Received time.Time
}

// Offset bounds how far the API server's clock is ahead of this node's (behind
// when negative) by the sample: the true offset lies in [lo, hi]. Date counts
// whole seconds, so the server's time at the stamp was in [Date, Date+1s), and
// the stamp fell between Sent and Received on this node's clock: the interval
// is one second plus the round trip wide, whatever the latency, which only
// widens it.
func (s DateSample) Offset() (lo, hi time.Duration) {
	// Wall clocks, not Go's monotonic readings: the offset is between two wall
	// clocks. Date carries no monotonic reading; Round(0) strips the others'.
	return s.Date.Sub(s.Received.Round(0)), s.Date.Add(time.Second).Sub(s.Sent.Round(0))
}

// Clock records the Date of every response of the API server that the clients
// of NewForConfig receive, so a check can compare this node's clock with the
// API server's without a request of its own: the agent's own requests (the
// watch of its node, the apiserver check, the condition) bring the samples.
//
// It keeps the recent samples, not only the latest: on a loaded API server the
// answers that bound the offset closely (a quick refusal by API Priority and
// Fairness, say) come between slow ones, and one close sample is enough.
type Clock struct {
	mu sync.Mutex
	// samples are the latest answers' samples, oldest first, at most keptSamples.
	samples []DateSample
	// inFlight counts the requests sent and not yet answered.
	inFlight int
	// next is closed, and replaced, when a request is sent or answered.
	next chan struct{}
}

const (
	// keptSamples bounds the samples a Clock keeps.
	keptSamples = 32
	// clockStep is how far this node's wall clock may have moved from its
	// monotonic one since a sample for the sample to still speak for it: a clock
	// stepped into place since (by chrony or ntpd at boot) makes the samples before
	// the step wrong, and a slewing clock moves at most 0.5 ms a second.
	clockStep = 100 * time.Millisecond
)

// NewClock returns a Clock with no sample.
func NewClock() *Clock { return &Clock{next: make(chan struct{})} }

// Latest returns the sample of the response that arrived last, if any.
func (c *Clock) Latest() (DateSample, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.samples) == 0 {
		return DateSample{}, false
	}
	return c.samples[len(c.samples)-1], true
}

// Best returns, of the samples whose response arrived at or after t, the one
// that bounds the offset most closely (the shortest round trip), if any. A
// sample taken before this node's wall clock stepped speaks for a clock that is
// gone, and is left out.
func (c *Clock) Best(t time.Time) (DateSample, bool) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	var best DateSample
	found := false
	for _, s := range c.samples {
		if s.Received.Before(t) || stepped(s.Received, now) {
			continue
		}
		if !found || s.Received.Sub(s.Sent) < best.Received.Sub(best.Sent) {
			best, found = s, true
		}
	}
	return best, found
}

// stepped reports whether the wall clock moved apart from the monotonic one
// between then and now, both read by time.Now.
func stepped(then, now time.Time) bool {
	d := now.Round(0).Sub(then.Round(0)) - now.Sub(then)
	return d > clockStep || d < -clockStep
}

// Since returns the latest sample whose response arrived at or after t, waiting
// for one until ctx ends: a request in flight (the watch that starts with the
// checks) brings it without one of the caller's own.
func (c *Clock) Since(ctx context.Context, t time.Time) (DateSample, bool) {
	for {
		s, ok := c.Latest()
		c.mu.Lock()
		next := c.next
		c.mu.Unlock()
		if ok && !s.Received.Before(t) {
			return s, true
		}
		select {
		case <-ctx.Done():
			return DateSample{}, false
		case <-next:
		}
	}
}

// Pending returns how many requests of the clients are in flight, and a
// channel closed at the next change: a request sent or answered.
func (c *Clock) Pending() (inFlight int, changed <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inFlight, c.next
}

func (c *Clock) sent() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inFlight++
	c.changed()
}

// answered ends a request, with the sample of its answer if it had one.
func (c *Clock) answered(s DateSample, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inFlight--
	if ok {
		if len(c.samples) == keptSamples {
			c.samples = append(c.samples[:0], c.samples[1:]...)
		}
		c.samples = append(c.samples, s)
	}
	c.changed()
}

// changed wakes the waiters of Pending and Since; c.mu is held.
func (c *Clock) changed() {
	close(c.next)
	c.next = make(chan struct{})
}

// Wrap returns rt recording into c the Date of each response it carries.
// Placed innermost (rest.Config.Wrap), it times the request on the wire
// alone, after client-go's rate limiter and its authentication.
func (c *Clock) Wrap(rt http.RoundTripper) http.RoundTripper { return clockTransport{c, rt} }

type clockTransport struct {
	clock *Clock
	next  http.RoundTripper
}

func (t clockTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.clock.sent()
	sent := time.Now()
	resp, err := t.next.RoundTrip(req)
	received := time.Now()
	var s DateSample
	ok := false
	if err == nil {
		if date, perr := http.ParseTime(resp.Header.Get("Date")); perr == nil {
			s, ok = DateSample{Date: date, Sent: sent, Received: received}, true
		}
	}
	t.clock.answered(s, ok)
	return resp, err
}

// WrappedRoundTripper lets client-go's transport utilities see through the
// wrapper (utilnet.CloseIdleConnectionsFor, for one).
func (t clockTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

// ClockOf returns the Clock of client, or nil for a client that records none
// (the fake clientset of tests, through adapt).
func ClockOf(client Interface) *Clock {
	if c, ok := client.(interface{ Clock() *Clock }); ok {
		return c.Clock()
	}
	return nil
}
