package agent

import (
	"math"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// stepper yields the delay before each next round of checks.
type stepper interface{ Step() time.Duration }

// jitter spreads the rounds of agents that started together (a node pool
// scaling up) so they do not hit the API server and DNS in lockstep.
const jitter = 0.1

// newBackoff returns the delays of RETRY_BACKOFF: exponential doubles from
// the base up to the cap, linear adds the base each round up to the cap,
// constant always waits the base.
func newBackoff(c Config) stepper {
	switch c.RetryBackoff {
	case "constant":
		return &wait.Backoff{Duration: c.RetryBackoffBase, Steps: math.MaxInt32, Jitter: jitter}
	case "linear":
		return &linear{base: c.RetryBackoffBase, max: c.RetryBackoffMax}
	default:
		return &wait.Backoff{Duration: c.RetryBackoffBase, Factor: 2, Cap: c.RetryBackoffMax, Steps: math.MaxInt32, Jitter: jitter}
	}
}

// linear is the one shape wait.Backoff does not offer: base, 2×base, 3×base, ...
type linear struct {
	base, max time.Duration
	n         int64
}

func (l *linear) Step() time.Duration {
	l.n++
	return wait.Jitter(min(time.Duration(l.n)*l.base, l.max), jitter)
}
