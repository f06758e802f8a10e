package checks_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeready/nodeready/checks"
)

func TestHold(t *testing.T) {
	tests := []struct {
		name    string
		min     time.Duration
		since   time.Duration // how long ago the agent started
		wantErr string
	}{
		{name: "held long enough", min: 30 * time.Second, since: 31 * time.Second},
		{name: "held exactly long enough", min: 30 * time.Second, since: 30 * time.Second},
		{name: "held too briefly", min: 30 * time.Second, since: 12*time.Second + 400*time.Millisecond, wantErr: "held 12s of 30s"},
		{name: "minutes", min: 5 * time.Minute, since: 90 * time.Second, wantErr: "held 1m30s of 5m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := checks.NewHold(tt.min, time.Now().Add(-tt.since))
			require.Equal(t, "hold", c.Name())
			require.Equal(t, tt.min.String(), c.Target())

			res := checks.Execute(t.Context(), c, time.Second)

			if tt.wantErr == "" {
				assert.NoError(t, res.Err)
			} else {
				require.Error(t, res.Err)
				assert.Equal(t, tt.wantErr, res.Err.Error())
			}
		})
	}
}

func TestHoldWaitThenPass(t *testing.T) {
	c := checks.NewHold(100*time.Millisecond, time.Now())

	res := checks.Execute(t.Context(), c, time.Second)
	require.Error(t, res.Err)
	assert.Regexp(t, `^held (0s|\d+ms) of 100ms$`, res.Err.Error())
	assert.Less(t, res.Duration, 50*time.Millisecond, "the check does not wait itself")

	time.Sleep(100 * time.Millisecond) // the agent's backoff between rounds

	res = checks.Execute(t.Context(), c, time.Second)
	assert.NoError(t, res.Err)
}
