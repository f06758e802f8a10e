package process_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeready/nodeready/e2e/framework/process"
)

func TestExitErrorHasTheLogTail(t *testing.T) {
	log := filepath.Join(t.TempDir(), "x.log")
	require.NoError(t, os.WriteFile(log, []byte("from an earlier run\n"), 0o644))
	p, err := process.Start(exec.Command("sh", "-c", "echo out; echo err >&2; exit 3"), process.Options{Name: "x", LogPath: log})
	require.NoError(t, err)
	<-p.Done()
	assert.Equal(t, 3, p.ExitCode())
	err = p.ExitError()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "x exited: exit status 3; last lines of "+log)
	assert.Contains(t, err.Error(), "out\nerr")

	data, err := os.ReadFile(log)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	require.Len(t, lines, 4, "the log is appended to, after a header")
	assert.Equal(t, "from an earlier run", lines[0])
	assert.Regexp(t, `^=== x starting at \S+: sh -c echo out`, lines[1])
}

func TestFreshLog(t *testing.T) {
	log := filepath.Join(t.TempDir(), "c.log")
	require.NoError(t, os.WriteFile(log, []byte("old\n"), 0o644))
	p, err := process.Start(exec.Command("sh", "-c", "echo new"), process.Options{LogPath: log, Fresh: true})
	require.NoError(t, err)
	<-p.Done()
	data, err := os.ReadFile(log)
	require.NoError(t, err)
	assert.Equal(t, "new\n", string(data), "a fresh log holds only the output")
	assert.Zero(t, p.ExitCode())
	assert.False(t, p.Finished.Before(p.Started))
}

func TestStop(t *testing.T) {
	dir := t.TempDir()
	// Exits on SIGTERM as 128+15.
	p, err := process.Start(exec.Command("sleep", "60"), process.Options{Name: "sleep", LogPath: filepath.Join(dir, "a.log")})
	require.NoError(t, err)
	assert.Nil(t, p.ExitError(), "running")
	assert.False(t, p.Stop(10*time.Second, nil))
	assert.Equal(t, 128+int(syscall.SIGTERM), p.ExitCode())
	assert.False(t, p.Stop(time.Second, nil), "a second Stop does nothing")

	// Ignores SIGTERM: killed after the grace, with the child it started (the process group).
	pidFile := filepath.Join(dir, "child")
	p, err = process.Start(exec.Command("sh", "-c", `trap "" TERM; sleep 60 & echo $! > `+pidFile+`; wait`),
		process.Options{Name: "stubborn", LogPath: filepath.Join(dir, "b.log")})
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, err := os.Stat(pidFile); return err == nil }, 10*time.Second, 10*time.Millisecond)
	start := time.Now()
	assert.True(t, p.Stop(200*time.Millisecond, nil))
	assert.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)
	assert.Equal(t, 128+int(syscall.SIGKILL), p.ExitCode())
	pid, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	assert.Eventually(t, func() bool {
		_, err := os.Stat("/proc/" + strings.TrimSpace(string(pid)))
		return os.IsNotExist(err)
	}, 10*time.Second, 10*time.Millisecond, "the child in the group was killed too")

	// abort cuts the grace short.
	p, err = process.Start(exec.Command("sh", "-c", `trap "" TERM; while :; do sleep 1; done`),
		process.Options{Name: "aborted", LogPath: filepath.Join(dir, "c.log")})
	require.NoError(t, err)
	abort := make(chan struct{})
	close(abort)
	start = time.Now()
	assert.True(t, p.Stop(time.Minute, abort))
	assert.Less(t, time.Since(start), 30*time.Second)
}

func TestStopAll(t *testing.T) {
	dir := t.TempDir()
	var procs []*process.Process
	for _, name := range []string{"a", "b"} {
		p, err := process.Start(exec.Command("sh", "-c", `trap "" TERM; while :; do sleep 1; done`),
			process.Options{Name: name, LogPath: filepath.Join(dir, name+".log")})
		require.NoError(t, err)
		procs = append(procs, p)
	}
	start := time.Now()
	process.StopAll(2*time.Second, procs[0], nil, procs[1])
	assert.Less(t, time.Since(start), 3500*time.Millisecond, "stopped concurrently: one grace, not two")
	for _, p := range procs {
		assert.True(t, p.Exited())
	}
}

func TestTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(path, []byte("1\n2\n3\n"), 0o644))
	assert.Equal(t, "2\n3", process.Tail(path, 2))
	assert.Equal(t, "1\n2\n3", process.Tail(path, 5))
	assert.Contains(t, process.Tail(filepath.Join(path, "missing"), 2), "cannot read")
}
