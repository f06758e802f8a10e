package checks

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nodeready/nodeready/internal/envvar"
	"github.com/nodeready/nodeready/internal/kube"
)

var (
	_ Check    = (*Clock)(nil)
	_ Reporter = (*Clock)(nil)
)

const (
	// MinClockSkew is the least CLOCK_MAX_SKEW: Date counts whole seconds, so
	// a sample bounds the offset within one second plus the round trip, and a
	// tolerance under two seconds would leave nothing for the round trip.
	MinClockSkew = 2 * time.Second
	// clockSampleAge is how old a sample may be and still speak for the clock
	// now: a clock stepped into place since (by chrony or ntpd at boot) is seen
	// in the next round.
	clockSampleAge = 30 * time.Second
	// clockInFlight is how long the check waits for the round's first request
	// to go out (the watch that starts with the first round, the apiserver check
	// beside it) before it sends one of its own.
	clockInFlight = time.Second
	// clockInFlightMax bounds the wait for the answers in flight when the
	// check's context has no deadline.
	clockInFlightMax = 10 * time.Second
)

// Clock passes when this node's clock agrees with the API server's within
// max. It reads the Date of the API server's answers to the agent's own
// requests (kube.Clock), so on the success path it costs no request; only when
// no recent answer bounds the offset closely enough does it GET /version.
//
// A node whose clock is off fails TLS (a certificate "expired" or "not yet
// valid"), its tokens and its leases in ways that are hard to read; it is the
// node's fault, said with the skew. The bounds of a sample widen with the
// round trip, never move: latency never makes a right clock look wrong. When
// the API server answers too slowly to bound the offset within max, the check
// passes on what it could prove, and its Report says what it could not: a
// loaded API server must not hold a healthy node.
type Clock struct {
	client kube.Interface
	clock  *kube.Clock
	max    time.Duration
	// report is the last run's, for Report: what a slow answer left unproven.
	mu     sync.Mutex
	report Report
}

// NewClock returns a check of this node's clock against the Date of the API
// server's answers that clock records from client, tolerating max.
func NewClock(client kube.Interface, clock *kube.Clock, max time.Duration) *Clock {
	return &Clock{client: client, clock: clock, max: max}
}

// Name implements Check.
func (c *Clock) Name() string { return string(NameClock) }

// Target implements Check.
func (c *Clock) Target() string { return "apiserver" }

// Report implements Reporter.
func (c *Clock) Report() Report {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Report{NotProven: slices.Clone(c.report.NotProven)}
}

// Run implements Check.
func (c *Clock) Run(ctx context.Context) error {
	c.mu.Lock()
	c.report = Report{}
	c.mu.Unlock()
	start := time.Now()
	since := start.Add(-clockSampleAge)
	// The answers at hand first, then those of the agent's requests in flight (the
	// watch of its node, the round's other checks): waiting for them costs no
	// request, and the round ends with them anyway. Half the check's time at most,
	// so that a request of its own still fits.
	wait, cancel := context.WithTimeout(ctx, inFlightBudget(ctx))
	defer cancel()
	for {
		if s, ok := c.clock.Best(since); ok {
			if told, err := c.judge(s); told {
				return err
			}
		}
		inFlight, changed := c.clock.Pending()
		until, stop := wait, context.CancelFunc(func() {})
		if inFlight == 0 {
			// Nothing in flight: the round's first requests may be about to go out.
			if time.Since(start) >= clockInFlight {
				break
			}
			until, stop = context.WithDeadline(wait, start.Add(clockInFlight))
		}
		select {
		case <-changed:
		case <-until.Done():
		}
		stop()
		if wait.Err() != nil {
			break
		}
	}
	// Any answer has a Date, a refusal too; only no answer at all fails, and that
	// is this node's path to the API server.
	if err := c.client.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Error(); err != nil && !answered(err) {
		return fmt.Errorf("get /version to compare clocks: %w", err)
	}
	s, ok := c.clock.Best(since)
	if !ok {
		return Unattributed(fmt.Errorf("the API server's answer to GET /version carries no Date"))
	}
	if told, err := c.judge(s); told {
		return err
	}
	// Neither beyond max nor surely within it: every answer took too long to tell.
	lo, hi := s.Offset()
	c.mu.Lock()
	c.report.NotProven = []string{fmt.Sprintf("a clock within %s of the API server's: its quickest answer took %s, so the API server's clock is %s to %s ahead of this node's",
		c.max, s.Received.Sub(s.Sent).Round(time.Millisecond), lo.Round(time.Millisecond), hi.Round(time.Millisecond))}
	c.mu.Unlock()
	return nil
}

// inFlightBudget is how long Run waits for answers to the agent's own requests:
// half of what is left of ctx, or clockInFlightMax without a deadline.
func inFlightBudget(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return time.Until(d) / 2
	}
	return clockInFlightMax
}

// judge says what s tells: a skew beyond max (an error), one within it (nil),
// or nothing when its bounds straddle max (told false).
func (c *Clock) judge(s kube.DateSample) (told bool, err error) {
	lo, hi := s.Offset()
	switch {
	case lo > c.max:
		return true, fmt.Errorf("this node's clock is at least %s behind the API server's (CLOCK_MAX_SKEW %s)", lo.Round(time.Millisecond), c.max)
	case hi < -c.max:
		return true, fmt.Errorf("this node's clock is at least %s ahead of the API server's (CLOCK_MAX_SKEW %s)", (-hi).Round(time.Millisecond), c.max)
	case lo >= -c.max && hi <= c.max:
		return true, nil
	}
	return false, nil
}

// serverTime bounds the API server's time at now, this node's, by the latest
// recent sample of clock: it lies in [earliest, latest]. ok is false without one.
func serverTime(clock *kube.Clock, now time.Time) (earliest, latest time.Time, ok bool) {
	if clock == nil {
		return time.Time{}, time.Time{}, false
	}
	s, ok := clock.Latest()
	if !ok || now.Sub(s.Received) > clockSampleAge {
		return time.Time{}, time.Time{}, false
	}
	lo, hi := s.Offset()
	now = now.Round(0)
	return now.Add(lo), now.Add(hi), true
}

// ClockOptions are the clock check's variables.
type ClockOptions struct {
	MaxSkew time.Duration `envconfig:"CLOCK_MAX_SKEW" default:"5s" desc:"clock: how far this node's clock may be from the API server's (by the Date of its answers); at least 2s, as Date counts whole seconds"`
}

// Validate implements KindOptions.
func (o *ClockOptions) Validate(*Options, Use) error {
	if o.MaxSkew < MinClockSkew {
		return &envvar.Error{Var: "CLOCK_MAX_SKEW", Value: o.MaxSkew.String(),
			Accepted: "at least 2s: the API server's Date counts whole seconds, so a smaller skew cannot be told"}
	}
	return nil
}

// Checks implements KindOptions.
func (o *ClockOptions) Checks(_ *Options, env Env) []Check {
	if env.Client == nil {
		return []Check{Skip(NameClock, "apiserver", noKubeconfig)}
	}
	clock := kube.ClockOf(env.Client)
	if clock == nil {
		return []Check{Skip(NameClock, "apiserver", "the client records no Date of the API server's answers")}
	}
	return []Check{NewClock(env.Client, clock, o.MaxSkew)}
}
