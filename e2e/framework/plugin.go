package framework

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/nodeready/nodeready/e2e/framework/harness"
)

// Plugin is the kubectl plugin, `kubectl nodeready`, as one user runs it against the test's
// control plane: the built binary (harness.PluginBinary) with a kubeconfig of its own.
type Plugin struct {
	t          *testing.T
	bin        string
	kubeconfig string
}

// PluginResult is what one run of the plugin printed, and its exit code.
type PluginResult struct {
	Stdout, Stderr string
	Code           int
}

// Plugin returns the kubectl plugin acting as user in groups, authenticated by a client
// certificate of the cluster CA, as a person's kubeconfig is.
func (f *Framework) Plugin(user string, groups ...string) *Plugin {
	t := f.t
	t.Helper()
	dir := t.TempDir()
	bin, err := harness.PluginBinary(t.Context(), f.RepoRoot(), dir)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := f.env.cp.WriteClientKubeconfig(kubeconfig, user, groups...); err != nil {
		t.Fatal(err)
	}
	return &Plugin{t: t, bin: bin, kubeconfig: kubeconfig}
}

// Run runs `kubectl nodeready args...`; a non-zero exit is its Code, not a failure.
func (p *Plugin) Run(args ...string) PluginResult {
	p.t.Helper()
	cmd := exec.CommandContext(p.t.Context(), p.bin, append([]string{"--kubeconfig", p.kubeconfig}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	r := PluginResult{Stdout: stdout.String(), Stderr: stderr.String()}
	switch {
	case errors.As(err, &exit):
		r.Code = exit.ExitCode()
	case err != nil:
		p.t.Fatalf("run kubectl-nodeready %v: %v", args, err)
	}
	return r
}

// MustRun is Run, failing the test unless the plugin exits 0.
func (p *Plugin) MustRun(args ...string) string {
	p.t.Helper()
	r := p.Run(args...)
	if r.Code != 0 {
		p.t.Fatalf("kubectl nodeready %v: exit %d: %s%s", args, r.Code, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// Start starts `kubectl nodeready args...` (a command that runs until stopped, such as
// status --watch) and returns what it has printed so far, stdout and stderr together, as it
// grows. stop ends it (SIGKILL) and waits; the test's end stops it too.
func (p *Plugin) Start(args ...string) (output func() string, stop func()) {
	p.t.Helper()
	ctx, cancel := context.WithCancel(p.t.Context())
	cmd := exec.CommandContext(ctx, p.bin, append([]string{"--kubeconfig", p.kubeconfig}, args...)...)
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		cancel()
		p.t.Fatalf("start kubectl-nodeready %v: %v", args, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	stop = func() {
		cancel()
		<-done
	}
	p.t.Cleanup(stop)
	return out.String, stop
}

// lockedBuffer is a buffer a process writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
