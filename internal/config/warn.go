package config

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Warning is what the agent says at start, at Warn, about a variable it
// accepts: one it does not know that looks like one of its own (a typo in the
// ConfigMap, which would otherwise be ignored without a word), or one that is
// deprecated. It never stops the agent.
type Warning struct {
	// Var is the variable, as the environment names it.
	Var string
	// Message is the log line's message; Hint says what to write instead.
	Message, Hint string
}

// Warnings lists the warnings about the environment, in the form of
// os.Environ: every variable that looks like one the agent reads but is not
// (Unknown), then INITIAL_TIMEOUT when it is anything but its default
// (deprecated).
func (c *Config) Warnings(environ []string) []Warning {
	var ws []Warning
	for _, name := range Unknown(environ) {
		ws = append(ws, Warning{Var: name.Var, Message: "Ignored unknown variable",
			Hint: "nodeready does not read it; did you mean " + name.Like + "?"})
	}
	if c.InitialTimeout != defaultInitialTimeout {
		ws = append(ws, Warning{Var: "INITIAL_TIMEOUT", Message: "Read deprecated variable", Hint: c.initialTimeoutHint()})
	}
	return ws
}

// defaultInitialTimeout is INITIAL_TIMEOUT's default, the value nodeready's
// ConfigMap and kube-node-ready's chart write: set to it, the variable is not
// warned about, as it changes nothing a later version without it would do.
const defaultInitialTimeout = 300 * time.Second

// initialTimeoutHint says what INITIAL_TIMEOUT does with the other settings:
// the failure is recorded after MAX_RETRIES rounds or INITIAL_TIMEOUT,
// whichever comes first, and MAX_RETRIES rounds take at most RoundsTime.
func (c *Config) initialTimeoutHint() string {
	rounds := c.RoundsTime()
	effect := fmt.Sprintf("no effect here: MAX_RETRIES=%d rounds end within %s, before it", c.MaxRetries, rounds)
	if c.InitialTimeout < rounds {
		effect = fmt.Sprintf("here it may record the failure before MAX_RETRIES=%d rounds, which can take up to %s", c.MaxRetries, rounds)
	}
	return "deprecated: MAX_RETRIES decides when failing checks are recorded as a failed verification; " +
		"INITIAL_TIMEOUT is still honoured when it comes first, with " + effect + "; set MAX_RETRIES instead"
}

// RoundsTime is the longest time MAX_RETRIES rounds of checks can take from
// the agent's start: each round up to CHECK_TIMEOUT (the checks of a round run
// together), and between them the delays of RETRY_BACKOFF with their 10 %
// jitter (agent/backoff.go).
func (c *Config) RoundsTime() time.Duration {
	total := time.Duration(c.MaxRetries) * c.CheckTimeout
	delay := c.RetryBackoffBase
	for range max(c.MaxRetries-1, 0) {
		total += delay + delay/10
		if c.RetryBackoff == "exponential" {
			delay = min(2*delay, c.RetryBackoffMax)
		}
	}
	return total
}

// Lookalike is a variable the agent does not read, and the one of its own it
// looks like.
type Lookalike struct{ Var, Like string }

// Unknown lists the variables of environ, in the form of os.Environ, that
// nodeready does not read but that look like a name it does: the same but for
// case, or one or two letters apart (one for a name shorter than 8), as a
// typo in the ConfigMap makes them. A variable of the pod that is not a near
// miss (PATH, a Service link's KUBE_DNS_PORT) is no business of nodeready's,
// and the ConfigMap's keys cannot be told from the others in the pod.
func Unknown(environ []string) []Lookalike {
	known := knownNames()
	var out []Lookalike
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if name == "" || slices.Contains(known, name) {
			continue
		}
		upper := strings.ToUpper(name)
		limit := 2
		if len(upper) < 8 {
			limit = 1
		}
		best, bestDist := "", limit+1
		for _, k := range known {
			if d := distance(upper, k); d < bestDist {
				best, bestDist = k, d
			}
		}
		if best != "" {
			out = append(out, Lookalike{Var: name, Like: best})
		}
	}
	slices.SortFunc(out, func(a, b Lookalike) int { return strings.Compare(a.Var, b.Var) })
	return out
}

// knownNames are every variable nodeready reads: its own and its checks'
// (Variables), kube-node-ready's it honours or refuses, and those the
// in-cluster client reads.
func knownNames() []string {
	var names []string
	for _, v := range Variables() {
		names = append(names, v.Name)
	}
	for _, v := range KubeNodeReadyVariables {
		names = append(names, v.Name)
	}
	// KUBE_ROOT_CA_CRT is wiring.CAEnv, which imports this package.
	return append(names, "KUBECONFIG", "KUBE_ROOT_CA_CRT", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")
}

// distance is the Levenshtein distance of a and b, in bytes (the names are
// ASCII).
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
