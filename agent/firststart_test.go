package agent

import (
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodeready/nodeready/config"
	"github.com/nodeready/nodeready/nodepatch"
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
	dir := t.TempDir()
	cfg := defaultConfig(t)
	cfg.StateDir = dir
	clients := Clients{Kube: fake.NewClientset()}
	firstProcess := time.Now().Add(-time.Hour)
	a, err := New(cfg, zerolog.New(io.Discard), clients, BuildInfo{}, firstProcess)
	require.NoError(t, err)
	a.shutdown()

	// The container restarts an hour later in the same pod.
	restarted, err := New(cfg, zerolog.New(io.Discard), clients, BuildInfo{}, time.Now())
	require.NoError(t, err)
	restarted.shutdown()
	assert.True(t, firstProcess.Equal(restarted.started), "counts from %s, not %s", firstProcess, restarted.started)

	// With that start, a failing held node fails open at its first failed round.
	node := &fakeNode{}
	broken := &fakeCheck{name: "dns"}
	broken.fail.Store(true)
	b := testAgent(t, node, broken)
	b.started = restarted.started
	b.cfg.MaxRetries = 100
	b.cfg.FailureAction = config.FailOpen
	b.cfg.FailOpenAfter = 30 * time.Minute
	_, _ = runAgent(t, b)
	waitFor(t, "failed open", b.verified.Load)
	assert.Equal(t, int32(1), broken.runs.Load(), "INITIAL_TIMEOUT and FAIL_OPEN_AFTER ran out before this container started")
	assert.Equal(t, 1.0, testutil.ToFloat64(b.metrics.failures))
	assert.Equal(t, []string{nodepatch.ReasonChecksFailed, nodepatch.ReasonFailedOpen}, node.reasons())
}
