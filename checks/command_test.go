//go:build unix

package checks_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeready/nodeready/checks"
)

// script writes an executable shell script with body and returns its path.
func script(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gate.sh")
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755))
	return path
}

func TestCommand(t *testing.T) {
	var long strings.Builder
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&long, "echo line %d\n", i)
	}
	tests := []struct {
		name    string
		body    string
		args    []string
		mode    os.FileMode
		wantErr string // %s is the script's path
	}{
		{name: "exit 0", body: "echo warmed"},
		{name: "arguments as given", body: `[ "$1" = "--mode" ] && [ "$2" = "fast warm" ] && [ $# -eq 2 ]`, args: []string{"--mode", "fast warm"}},
		{name: "environment of the agent", body: `[ "$NODEREADY_TEST_VALUE" = "from the agent" ]`},
		{
			name:    "exit 1 with stdout and stderr",
			body:    "echo warming cache\necho cache not ready >&2\nexit 1",
			wantErr: "run %s: exit status 1, output:\nwarming cache\ncache not ready",
		},
		{
			name:    "only the last lines",
			body:    long.String() + "exit 2",
			wantErr: "run %s: exit status 2, output:\n...\nline 21\nline 22\nline 23\nline 24\nline 25\nline 26\nline 27\nline 28\nline 29\nline 30",
		},
		{
			name:    "only the last KiB",
			body:    "head -c 3000 /dev/zero | tr '\\0' x\necho\necho the end\nexit 1",
			wantErr: "run %s: exit status 1, output:\n...\nthe end",
		},
		{name: "no output", body: "exit 3", wantErr: "run %s: exit status 3, no output"},
		{name: "not executable", body: "exit 0", mode: 0o644, wantErr: "fork/exec %s: permission denied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("NODEREADY_TEST_VALUE", "from the agent")
			path := script(t, tt.body)
			if tt.mode != 0 {
				require.NoError(t, os.Chmod(path, tt.mode))
			}
			c := checks.NewCommand(path, tt.args)
			requireIdentity(t, c, "command", strings.Join(append([]string{path}, tt.args...), " "))

			assertErr(t, checks.Execute(t.Context(), c, runTimeout).Err, strings.ReplaceAll(tt.wantErr, "%s", path))
		})
	}
}

func TestCommandMissing(t *testing.T) {
	res := checks.Execute(t.Context(), checks.NewCommand("/nonexistent/warmup.sh", nil), time.Second)

	require.Error(t, res.Err)
	assert.Equal(t, "fork/exec /nonexistent/warmup.sh: no such file or directory", res.Err.Error())
}

// readPID reads a process ID a script wrote to path.
func readPID(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	require.NoError(t, err)
	return pid
}

// dead reports whether pid is gone or a zombie that only waits to be reaped
// by whichever process inherited it.
func dead(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	// The state follows the command name in parentheses: "123 (sleep) Z ...".
	i := strings.LastIndexByte(string(stat), ')')
	return i >= 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X')
}

func TestCommandTimeoutKillsProcessGroup(t *testing.T) {
	dir := t.TempDir()
	leader, child := filepath.Join(dir, "leader.pid"), filepath.Join(dir, "child.pid")
	// A shell that waits for a child, and a second child in the background:
	// killing only the shell would leave both sleeping, and the one in the
	// foreground holding the output pipe open.
	path := script(t, `echo $$ > "$1"
sleep 30 &
echo $! > "$2"
echo warming
sleep 30`)
	c := checks.NewCommand(path, []string{leader, child})

	start := time.Now()
	res := checks.Execute(t.Context(), c, 300*time.Millisecond)
	took := time.Since(start)

	require.Error(t, res.Err)
	assert.Equal(t, fmt.Sprintf("run %s: signal: killed, output:\nwarming (timed out after 300ms)", path), res.Err.Error())
	assert.ErrorIs(t, res.Err, context.DeadlineExceeded)
	assert.Less(t, took, 2*time.Second, "bounded by the timeout, not by the sleeps")
	pgid := readPID(t, leader)
	bg := readPID(t, child)
	assert.Eventually(t, func() bool {
		return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH) || (dead(pgid) && dead(bg))
	}, 2*time.Second, 20*time.Millisecond, "every process of the group is gone")
}

func TestCommandKillsLeftovers(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	path := script(t, `sleep 30 >/dev/null 2>&1 &
echo $! > "$1"
exit 0`)

	res := checks.Execute(t.Context(), checks.NewCommand(path, []string{pidFile}), runTimeout)

	require.NoError(t, res.Err)
	bg := readPID(t, pidFile)
	assert.Eventually(t, func() bool { return dead(bg) }, 2*time.Second, 20*time.Millisecond,
		"what the command leaves running is killed")
}

func TestCommandWaitThenPass(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "warm")
	path := script(t, `[ -e "$1" ] || { echo "cache not warm yet"; exit 1; }`)
	c := checks.NewCommand(path, []string{marker})

	failThenPass(t, c, fmt.Sprintf("run %s: exit status 1, output:\ncache not warm yet", path), func() {
		require.NoError(t, os.WriteFile(marker, nil, 0o644))
	})
}

// TestCommandStartOutOfResources: a program that cannot start because the node is out
// of processes or memory (fork fails with EAGAIN or ENOMEM) is the node's fault; one
// that cannot start for any other reason (not executable here) stays the
// configuration's, as every node would fail it alike.
func TestCommandStartOutOfResources(t *testing.T) {
	for _, tt := range []struct {
		errno syscall.Errno
		want  string
	}{
		{syscall.EAGAIN, "fail"},
		{syscall.ENOMEM, "fail"},
		{syscall.EACCES, "misconfigured"},
	} {
		t.Run(tt.errno.Error(), func(t *testing.T) {
			c := checks.NewCommandStartedBy("/bin/true", nil, func(cmd *exec.Cmd) error {
				// What os.StartProcess returns when the fork or the exec fails.
				return &os.PathError{Op: "fork/exec", Path: cmd.Path, Err: tt.errno}
			})
			res := checks.Execute(t.Context(), c, runTimeout)
			require.ErrorIs(t, res.Err, tt.errno)
			assert.Equal(t, tt.want, res.Status(), "%v", res.Err)
		})
	}
}
