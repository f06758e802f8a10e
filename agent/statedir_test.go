package agent

import (
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodeready/nodeready/internal/config"
	"github.com/nodeready/nodeready/internal/kube/adapt"
	"github.com/nodeready/nodeready/internal/wellknown"
)

func TestFirstStart(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)

	t.Run("no STATE_DIR: this start", func(t *testing.T) {
		got, err := firstStart("", t0)
		require.NoError(t, err)
		assert.Equal(t, t0, got)
	})
	t.Run("a restarted container counts from the first start", func(t *testing.T) {
		dir := t.TempDir()
		got, err := firstStart(dir, t0)
		require.NoError(t, err)
		assert.Equal(t, t0, got)
		got, err = firstStart(dir, t0.Add(10*time.Minute))
		require.NoError(t, err)
		assert.True(t, t0.Equal(got), "got %s", got)
	})
	t.Run("an unreadable record: this start, and why", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, firstStartFile), []byte("garbage"), 0o600))
		got, err := firstStart(dir, t0)
		require.Error(t, err)
		assert.Equal(t, t0, got)
	})
	t.Run("a record after this start (clock went back): this start", func(t *testing.T) {
		dir := t.TempDir()
		_, err := firstStart(dir, t0.Add(time.Hour))
		require.NoError(t, err)
		got, err := firstStart(dir, t0)
		require.Error(t, err)
		assert.Equal(t, t0, got)
	})
	t.Run("a directory that cannot be written: this start, and why", func(t *testing.T) {
		got, err := firstStart(filepath.Join(t.TempDir(), "missing"), t0)
		require.Error(t, err)
		assert.Equal(t, t0, got)
	})
}

// TestTimersSurviveContainerRestart: an agent whose container restarts (OOM
// kill, liveness restart) in the same pod keeps counting INITIAL_TIMEOUT and
// FAIL_OPEN_AFTER from the pod's first start, so a crash-looping agent still
// fails open on time. Before, every restart gave it a fresh 30 minutes.
func TestTimersSurviveContainerRestart(t *testing.T) {
	env := with(failing, map[string]string{"STATE_DIR": t.TempDir(), "FAILURE_ACTION": config.FailOpen, "FAIL_OPEN_AFTER": "30m", "MAX_RETRIES": "100"})
	firstProcess := time.Now().Add(-time.Hour)
	first, err := New(loadConfig(t, with(fast, env), false), zerolog.New(io.Discard), Clients{Kube: adapt.Clientset(fake.NewClientset())}, BuildInfo{}, firstProcess)
	require.NoError(t, err)
	first.shutdown()

	// The container restarts an hour later in the same pod; its checks still fail.
	c := newCluster(heldNode())
	r := start(t, c.peered(t, newAgent(t, Clients{Kube: c.kube()}, env)))
	waitFor(t, "failed open", func() bool { return isVerified(r.Agent) })
	assert.Equal(t, 1.0, rounds(r.Agent), "INITIAL_TIMEOUT and FAIL_OPEN_AFTER ran out before this container started")
	assert.Equal(t, 1.0, failures(r.Agent))
	assert.Equal(t, []string{string(wellknown.ChecksFailed), string(wellknown.FailedOpen)}, c.reasons())
	held, err := time.ParseDuration(c.node(t).Annotations["node-ready/verified-duration"])
	require.NoError(t, err)
	assert.GreaterOrEqual(t, held, time.Hour, "counted from this container's start")
	assert.Equal(t, wellknown.FailedOpenValue, c.node(t).Labels["node-ready/verified"])
}

// TestRoundsSurviveContainerRestart: a container restarted in the same pod (OOM
// kill, liveness restart) counts MAX_RETRIES on from the rounds before it, so a
// node whose failure was recorded keeps saying ChecksFailed. Before, the new
// container's first rounds wrote ChecksFailing again, as for a node that just
// joined, until MAX_RETRIES more rounds had failed.
func TestRoundsSurviveContainerRestart(t *testing.T) {
	env := with(failing, map[string]string{"STATE_DIR": t.TempDir(), "MAX_RETRIES": "3", "INITIAL_TIMEOUT": "30m"})
	c := newCluster(heldNode())
	first := runNew(t, c, env)
	waitFor(t, "the failure recorded", func() bool { return failures(first.Agent) == 1 })
	require.NoError(t, first.stop(t))
	recorded := c.reasons()
	require.Equal(t, string(wellknown.ChecksFailed), recorded[len(recorded)-1])

	second := runNew(t, c, env)
	waitFor(t, "the restarted container's first rounds", func() bool { return rounds(second.Agent) >= 2 })
	require.NoError(t, second.stop(t))
	assert.Equal(t, 1.0, failures(second.Agent), "recorded at its first round: the rounds before it count")
	assert.Equal(t, recorded, c.reasons()[:len(recorded)])
	assert.NotContains(t, c.reasons()[len(recorded):], string(wellknown.ChecksFailing), "the node said ChecksFailing again after its failure was recorded")
}
