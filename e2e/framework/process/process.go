// Package process supervises the programs the tests start: control plane components, the real
// node's daemons, the simulated kubelet's agents and Karpenter. Each runs in its own process
// group, so that stopping it also stops what it spawned, and dies with the test binary; its
// output goes to a log file whose end explains an unexpected exit.
package process

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// tailLines is how much of the log an exit error shows.
const tailLines = 20

// Options say how a process is named and where its output goes.
type Options struct {
	// Name names the process in its log's header and in ExitError; the command's path when
	// empty.
	Name string
	// LogPath receives stdout and stderr. It is appended to after a header line with the
	// command, so that the runs of a restarted component share one log.
	LogPath string
	// Fresh truncates the log and writes no header: a container's log holds only its output.
	Fresh bool
}

// Process is a started command.
type Process struct {
	// Cmd is the command as started (its Env, Dir and Process.Pid); it must not be changed.
	Cmd     *exec.Cmd
	Name    string
	LogPath string
	Started time.Time
	// Finished is when the process was reaped; set before Done is closed.
	Finished time.Time

	done chan struct{}
	err  error // cmd.Wait's result, set before done is closed
}

// Start starts cmd, its arguments, environment and directory set by the caller, in its own
// process group, with its output in opts.LogPath. Pdeathsig: if the test binary dies, the
// kernel kills the process too.
func Start(cmd *exec.Cmd, opts Options) (*Process, error) {
	name := opts.Name
	if name == "" {
		name = cmd.Path
	}
	flags := os.O_CREATE | os.O_WRONLY | os.O_APPEND
	if opts.Fresh {
		flags = os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	}
	log, err := os.OpenFile(opts.LogPath, flags, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	if !opts.Fresh {
		fmt.Fprintf(log, "=== %s starting at %s: %s\n", name, time.Now().Format(time.RFC3339Nano), strings.Join(cmd.Args, " "))
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := startOnSpawner(cmd); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Cmd: cmd, Name: name, LogPath: opts.LogPath, Started: time.Now(), done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		p.Finished = time.Now()
		log.Close()
		close(p.done)
	}()
	return p, nil
}

// Done is closed once the process has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// ExitError describes an exit with the end of the log, or is nil while the process runs.
func (p *Process) ExitError() error {
	if !p.Exited() {
		return nil
	}
	err := p.err
	if err == nil {
		err = errors.New("exit status 0")
	}
	return fmt.Errorf("%s exited: %w; last lines of %s:\n%s", p.Name, err, p.LogPath, Tail(p.LogPath, tailLines))
}

// ExitCode is the exit code, or 128+n after signal n as container runtimes report it. Valid
// once Done is closed.
func (p *Process) ExitCode() int {
	if ws, ok := p.Cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return p.Cmd.ProcessState.ExitCode()
}

// Signal sends sig to the process group.
func (p *Process) Signal(sig syscall.Signal) {
	_ = syscall.Kill(-p.Cmd.Process.Pid, sig)
}

// Stop sends SIGTERM to the process group and SIGKILL if the process is still there after
// grace; a closed abort (nil for none) cuts the grace short. It returns once the process is
// reaped, reports whether SIGKILL was needed, and may be called more than once.
func (p *Process) Stop(grace time.Duration, abort <-chan struct{}) (killed bool) {
	if p.Exited() {
		return false
	}
	p.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return false
	case <-t.C:
	case <-abort:
	}
	p.Kill()
	return true
}

// Kill sends SIGKILL to the process group and waits until the process is reaped. A reaped
// process is not signalled: its group id may belong to another process by now.
func (p *Process) Kill() {
	if !p.Exited() {
		p.Signal(syscall.SIGKILL)
	}
	<-p.done
}

// StopAll stops processes (nil ones skipped) concurrently, so the total wait is one grace.
func StopAll(grace time.Duration, procs ...*Process) {
	var wg sync.WaitGroup
	for _, p := range procs {
		if p != nil {
			wg.Go(func() { p.Stop(grace, nil) })
		}
	}
	wg.Wait()
}

// Tail returns the last n lines of a file, or a note why it could not be read: what a
// failing test prints of a process's log.
func Tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// Pdeathsig is sent when the thread that forked the child exits, not the process (see
// prctl(2)): a test that locks a goroutine to its thread and lets it end (to enter a pod's
// network namespace, say) ends that thread, and would kill every daemon the thread had forked.
// So every process is forked on one thread that never ends.
var spawns = make(chan spawn)

type spawn struct {
	cmd  *exec.Cmd
	done chan error
}

func init() {
	go func() {
		runtime.LockOSThread() // never unlocked: this goroutine, and so its thread, never ends
		for s := range spawns {
			s.done <- s.cmd.Start()
		}
	}()
}

// startOnSpawner starts cmd on the spawning thread.
func startOnSpawner(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	spawns <- spawn{cmd, done}
	return <-done
}
