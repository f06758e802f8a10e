package agent

import (
	"math"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeready/nodeready/internal/config"
)

// stepper yields the delay before each next round of checks.
type stepper interface{ Step() time.Duration }

// jitter spreads the rounds of agents that started together (a node pool
// scaling up) so they do not hit the API server and DNS in lockstep.
const jitter = 0.1

// newBackoff returns the delays of RETRY_BACKOFF: exponential doubles from
// the base up to the cap; constant and linear always wait the base. linear
// is kube-node-ready's name for a constant delay (its checker waited 5s
// every time), so it keeps that meaning, and config makes 5s its base when
// RETRY_BACKOFF_BASE is unset.
func newBackoff(c config.Config) stepper {
	switch c.RetryBackoff {
	case "constant", "linear":
		return &wait.Backoff{Duration: c.RetryBackoffBase, Steps: math.MaxInt32, Jitter: jitter}
	default:
		return &wait.Backoff{Duration: c.RetryBackoffBase, Factor: 2, Cap: c.RetryBackoffMax, Steps: math.MaxInt32, Jitter: jitter}
	}
}
