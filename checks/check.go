// Package checks holds the network and warm-up checks the agent runs before it
// releases a node. A check is small and honest: it does one probe, honours its
// context, and returns nil on success or an error a person can read. Timing,
// timeouts, panics and concurrency live in Execute and RunAll, so no check can
// forget them.
package checks

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"
)

// Check is one probe against one target.
type Check interface {
	// Name is the stable snake_case kind of the check, one of the Name
	// constants. It is used as a metric label, so it must come from a closed set.
	Name() string
	// Target is what the check probes (a host name, an address, a URL), for
	// people: logs and the dry-run table. Never a metric label.
	Target() string
	// Run performs the probe once. nil means pass. It honours ctx and has no
	// retries, sleeps or metrics inside.
	Run(ctx context.Context) error
}

// Name is the name of a kind of check: what Check.Name returns (as the metrics'
// check label) and what the agent's CHECKS setting lists.
type Name string

// The names of the checks.
const (
	NameDNS           Name = "dns"
	NameTCP           Name = "tcp"
	NameHTTP          Name = "http"
	NameAPIServer     Name = "apiserver"
	NameClock         Name = "clock"
	NameEndpoints     Name = "endpoints"
	NamePodNetwork    Name = "podnetwork"
	NameNetworkPolicy Name = "networkpolicy"

	// The gates: the node's own readiness beyond the network.
	NameDaemonSets Name = "daemonsets"
	NameConditions Name = "conditions"
	NameResources  Name = "resources"
	NameCSI        Name = "csi"
	NameDRA        Name = "dra"
	NameCommand    Name = "command"
)

// ErrSkipped marks a check that could not run where it is (for example an API
// check in --dry-run without a kubeconfig). Wrap it with the reason.
var ErrSkipped = errors.New("skipped")

// Result is the outcome of one Execute.
type Result struct {
	Name     string
	Target   string
	Err      error // nil on pass; wraps ErrSkipped when the check did not run
	Duration time.Duration
	// Report is what a passing check says beyond "passed", when it says
	// (Reporter): for people, in the log, the condition and the Events.
	Report Report
}

// Report is what a passing check reached and proved, what it could not prove,
// and what off this node it found broken. A pass never claims what Report
// says was not proven.
type Report struct {
	// Reached names what the check reached, with what it proved there: "10.244.1.3
	// on node-b, 1450-byte packets both ways".
	Reached []string
	// NotProven says what the check could not prove, and why: "full-size packets:
	// this pod may not open a ping socket".
	NotProven []string
	// Unreachable names peers off this node that did not answer while others did:
	// their fault, not this node's, named so that they can be found.
	Unreachable []string
}

// Empty reports whether the report says nothing.
func (r Report) Empty() bool {
	return len(r.Reached)+len(r.NotProven)+len(r.Unreachable) == 0
}

// Reporter is a check that says what its last passing run reached, such as
// the pods of PodNetwork.
type Reporter interface {
	Report() Report
}

// Passed reports whether the check ran and passed.
func (r Result) Passed() bool { return r.Err == nil }

// Skipped reports whether the check did not run.
func (r Result) Skipped() bool { return errors.Is(r.Err, ErrSkipped) }

// Misconfigured reports whether the check failed by the fault of the cluster or
// the configuration, not this node (Misconfiguration).
func (r Result) Misconfigured() bool { return errors.Is(r.Err, ErrMisconfigured) }

// Unattributed reports whether the check failed on this node by a fault whose owner
// the node cannot tell (Unattributed): it holds the node and brings no failure action.
func (r Result) Unattributed() bool { return errors.Is(r.Err, ErrUnattributed) }

// Status is "pass", "fail" (this node's fault), "misconfigured" (the cluster's or
// the configuration's) or "skip".
func (r Result) Status() string {
	switch {
	case r.Passed():
		return "pass"
	case r.Skipped():
		return "skip"
	case r.Misconfigured():
		return "misconfigured"
	default:
		return "fail"
	}
}

// Execute runs c once, bounded by timeout, and records how long it took. A
// panic in the check becomes a failed result instead of a crashed agent.
func Execute(ctx context.Context, c Check, timeout time.Duration) (res Result) {
	res = Result{Name: c.Name()}
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, timeoutError{timeout})
	defer cancel()
	start := time.Now()
	defer func() {
		res.Duration = time.Since(start)
		res.Target = c.Target() // after the run: a check may learn its target (the cluster DNS Service found)
		if p := recover(); p != nil {
			res.Err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	err := c.Run(ctx)
	if d, _ := ctx.Deadline(); err != nil && !time.Now().Before(d) {
		// Socket deadlines copied from ctx can fire a moment before ctx's own
		// timer; wait for it so the timeout is reported as one.
		<-ctx.Done()
	}
	if err != nil && ctx.Err() != nil && !errors.Is(err, ErrSkipped) {
		// The deadline or an abort ended the check: say which, keep the detail.
		// Only Execute's own deadline is a timeout; a cancelled parent (SIGTERM,
		// the agent's overall budget) is an abort, which callers treat
		// differently from a failure.
		cause := context.Cause(ctx)
		var te timeoutError
		if errors.As(cause, &te) {
			err = fmt.Errorf("%w (%w)", err, cause)
		} else {
			err = fmt.Errorf("%w (aborted: %w)", err, cause)
		}
	}
	res.Err = err
	if r, ok := c.(Reporter); ok && err == nil {
		res.Report = r.Report()
	}
	return res
}

// timeoutError is the cause Execute gives its own deadline, so a result can
// tell "this check took too long" from "the agent is stopping". It still
// matches context.DeadlineExceeded with errors.Is.
type timeoutError struct{ after time.Duration }

func (e timeoutError) Error() string { return "timed out after " + e.after.String() }
func (timeoutError) Unwrap() error   { return context.DeadlineExceeded }

// RunAll executes every check concurrently and returns the results in the
// order of cs, so a round takes as long as its slowest check.
func RunAll(ctx context.Context, cs []Check, timeout time.Duration) []Result {
	results := make([]Result, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() { results[i] = Execute(ctx, c, timeout) })
	}
	wg.Wait()
	return results
}
