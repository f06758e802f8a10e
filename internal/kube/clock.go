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
type Clock struct {
	mu     sync.Mutex
	latest DateSample
	has    bool
	// next is closed, and replaced, when a sample is recorded.
	next chan struct{}
}

// NewClock returns a Clock with no sample.
func NewClock() *Clock { return &Clock{next: make(chan struct{})} }

// Latest returns the sample of the response that arrived last, if any.
func (c *Clock) Latest() (DateSample, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.latest, c.has
}

// Since returns the latest sample whose response arrived at or after t, waiting
// for one until ctx ends: a request in flight (the watch that starts with the
// checks) brings it without one of the caller's own.
func (c *Clock) Since(ctx context.Context, t time.Time) (DateSample, bool) {
	for {
		c.mu.Lock()
		s, ok, next := c.latest, c.has && !c.latest.Received.Before(t), c.next
		c.mu.Unlock()
		if ok {
			return s, true
		}
		select {
		case <-ctx.Done():
			return DateSample{}, false
		case <-next:
		}
	}
}

func (c *Clock) record(s DateSample) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.latest, c.has = s, true
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
	sent := time.Now()
	resp, err := t.next.RoundTrip(req)
	received := time.Now()
	if err != nil {
		return resp, err
	}
	if date, perr := http.ParseTime(resp.Header.Get("Date")); perr == nil {
		t.clock.record(DateSample{Date: date, Sent: sent, Received: received})
	}
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
