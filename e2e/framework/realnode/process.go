package realnode

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is one daemon of the node, its output appended to <logDir>/<name>.log.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
}

// start runs argv in the namespaces of the holder process nsPid (none when 0), in the
// daemons' cgroup. Pdeathsig: when the test process dies, so does the daemon.
func start(name, logDir string, nsPid int, env []string, argv ...string) (*process, error) {
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	fmt.Fprintf(logFile, "=== %s starting at %s: %s\n", name, time.Now().Format(time.RFC3339Nano), strings.Join(argv, " "))
	if nsPid != 0 {
		p := strconv.Itoa(nsPid)
		// Without --pid, nsenter execs in place: the daemon is the process started here.
		argv = append([]string{"nsenter", "--net=/proc/" + p + "/ns/net", "--mount=/proc/" + p + "/ns/mnt", "--"}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	pr := &process{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		pr.err = cmd.Wait()
		logFile.Close()
		close(pr.done)
	}()
	if err := joinDaemons(cmd.Process.Pid); err != nil {
		pr.stop(0)
		return nil, err
	}
	return pr, nil
}

// exited reports an exit as an error with the end of the log, or nil while it runs.
func (p *process) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited: %v; last lines of %s:\n%s", p.name, p.err, p.logPath, tail(p.logPath, 15))
	default:
		return nil
	}
}

// stop sends SIGTERM, and SIGKILL after grace.
func (p *process) stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
