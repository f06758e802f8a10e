package kubelet

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// process is one run of the agent binary for a pod: the container.
type process struct {
	cmd           *exec.Cmd
	started       time.Time
	metricsPort   int    // the loopback port given as METRICS_PORT
	metricsAddr   string // 127.0.0.1:metricsPort
	containerPort int    // the port the pod spec knows METRICS_PORT as; probes of it go to metricsPort

	done     chan struct{} // closed once the process is reaped
	state    *os.ProcessState
	finished time.Time
}

// startProcess runs bin in its own process group, with exactly env (a container does not
// inherit the host's environment), output to logPath.
func startProcess(bin string, args, env []string, dir, logPath string, metricsPort int) (*process, error) {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = log, log
	// Pdeathsig: if the test binary dies, the kernel kills the agents too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("exec %s: %w", bin, err)
	}
	p := &process{
		cmd:         cmd,
		started:     time.Now(),
		metricsPort: metricsPort,
		metricsAddr: net.JoinHostPort(NodeIP, strconv.Itoa(metricsPort)),
		done:        make(chan struct{}),
	}
	go func() {
		_ = cmd.Wait()
		p.state, p.finished = cmd.ProcessState, time.Now()
		log.Close()
		close(p.done)
	}()
	return p, nil
}

// signal sends sig to the process group.
func (p *process) signal(sig syscall.Signal) {
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
}

// stop sends SIGTERM, waits up to grace for the process to end, then sends SIGKILL. A
// closed abort cuts the grace period short. It returns once the process is reaped and
// reports whether SIGKILL was needed.
func (p *process) stop(grace time.Duration, abort <-chan struct{}) (killed bool) {
	p.signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return false
	case <-t.C:
	case <-abort:
	}
	p.kill()
	return true
}

// kill sends SIGKILL and waits until the process is reaped.
func (p *process) kill() {
	p.signal(syscall.SIGKILL)
	<-p.done
}

// exitCode is the process's exit code, or 128+n after signal n, as container runtimes report
// it. Valid once done is closed.
func (p *process) exitCode() int {
	if ws, ok := p.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return p.state.ExitCode()
}

// Ports for METRICS_PORT come from below Linux's default ephemeral range (32768-60999).
// A port from the ephemeral range can be taken as the source port of some outgoing
// connection between the check here and the agent's bind, and the agent would then fail to
// start for a reason no real pod has: in a cluster each pod has its own network namespace.
const (
	firstPort = 20000
	lastPort  = 32767
)

// nextPort walks the range from a random start, so that two processes started at the same
// moment never get the same port from one test binary, and two test binaries rarely do.
var nextPort = func() *atomic.Int32 {
	var p atomic.Int32
	p.Store(rand.Int32N(lastPort - firstPort + 1))
	return &p
}()

// freePort returns a port that is free on every address, as the agent listens on them all.
func freePort() (int, error) {
	for range lastPort - firstPort + 1 {
		port := firstPort + int(nextPort.Add(1)-1)%(lastPort-firstPort+1)
		l, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		l.Close()
		return port, nil
	}
	return 0, fmt.Errorf("find free port: none free in %d-%d", firstPort, lastPort)
}
