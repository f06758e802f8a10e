package agent

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeready/nodeready/internal/config"
)

// steps returns the first n delays of the configured backoff.
func steps(c config.Config, n int) []time.Duration {
	b := newBackoff(c)
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = b.Step()
	}
	return out
}

// assertNear checks each delay against its nominal value and the 10% jitter
// on top of it.
func assertNear(t *testing.T, want, got []time.Duration) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		assert.GreaterOrEqual(t, got[i], want[i], "delay %d", i+1)
		assert.LessOrEqual(t, got[i], want[i]+want[i]/10, "delay %d", i+1)
	}
}

// TestLinearBackoffMatchesKubeNodeReady: kube-node-ready's checker waited a
// constant 5s between attempts with RETRY_BACKOFF=linear
// (internal/checker/checker.go, calculateBackoff), so nodeready does too,
// unless RETRY_BACKOFF_BASE sets another delay.
func TestLinearBackoffMatchesKubeNodeReady(t *testing.T) {
	five := []time.Duration{5 * time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second}
	two := []time.Duration{2 * time.Second, 2 * time.Second, 2 * time.Second, 2 * time.Second, 2 * time.Second, 2 * time.Second}
	tests := []struct {
		name string
		env  map[string]string
		want []time.Duration
	}{
		{"linear", map[string]string{"RETRY_BACKOFF": "linear"}, five},
		{"linear with an empty base", map[string]string{"RETRY_BACKOFF": "linear", "RETRY_BACKOFF_BASE": ""}, five},
		{"linear with a base", map[string]string{"RETRY_BACKOFF": "linear", "RETRY_BACKOFF_BASE": "2s"}, two},
		{"constant", map[string]string{"RETRY_BACKOFF": "constant", "RETRY_BACKOFF_BASE": "2s"}, two},
		{"constant keeps its 1s default", map[string]string{"RETRY_BACKOFF": "constant"},
			[]time.Duration{time.Second, time.Second, time.Second, time.Second, time.Second, time.Second}},
		// kube-node-ready: 1s, 2s, 4s, 8s, 16s, then 30s.
		{"exponential", map[string]string{"RETRY_BACKOFF": "exponential"},
			[]time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.env["NODE_NAME"] = "node-a"
			tt.env["KUBERNETES_SERVICE_HOST"] = "10.96.0.1"
			cfg := loadConfig(t, tt.env, false)

			assertNear(t, tt.want, steps(cfg, len(tt.want)))
		})
	}
}

func TestBackoffShapes(t *testing.T) {
	within := func(t *testing.T, want, got time.Duration) {
		t.Helper()
		assert.GreaterOrEqual(t, got, want)
		assert.LessOrEqual(t, got, want+time.Duration(float64(want)*jitter))
	}
	s := time.Second
	tests := map[string][]time.Duration{
		"exponential": {s, 2 * s, 4 * s, 8 * s, 10 * s, 10 * s},
		"linear":      {s, s, s, s}, // kube-node-ready's meaning: the same delay every round
		"constant":    {s, s, s, s},
	}
	for kind, want := range tests {
		t.Run(kind, func(t *testing.T) {
			b := newBackoff(config.Config{RetryBackoff: kind, RetryBackoffBase: s, RetryBackoffMax: 10 * s})
			for i, w := range want {
				got := b.Step()
				t.Logf("round %d: %s", i+1, got)
				within(t, w, got)
			}
		})
	}
}
