package checks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nodeready/nodeready/internal/envvar"
)

var _ Check = (*Command)(nil)

const (
	// commandTailBytes and commandTailLines bound the output an error
	// carries: the end of it, where a script says why it failed.
	commandTailBytes = 1 << 10
	commandTailLines = 10
	// commandWaitDelay bounds the wait for the output pipes after the
	// command ended or was killed, in case something outside its process
	// group still holds them open.
	commandWaitDelay = time.Second
)

// Command passes when a program, run from the agent's container, exits 0. It
// is how a site adds a gate of its own: a script mounted from a ConfigMap
// that warms a cache, pulls a model or asks a local agent.
//
// The program runs without a shell, with the agent's environment (NODE_NAME
// and the rest), in a process group of its own. When the check's time runs
// out the whole group is killed, so the children of a script die with it;
// anything the program leaves running when it ends is killed as well. Its
// stdout and stderr are read together, and the last lines of them go into
// the error.
type Command struct {
	path string
	args []string
	// start starts the program: (*exec.Cmd).Start, or in tests a fork that
	// fails as the kernel makes it fail, which a test cannot make it do.
	start func(*exec.Cmd) error
}

// NewCommand returns a check that runs path with args.
func NewCommand(path string, args []string) *Command {
	return &Command{path: path, args: args}
}

// Name implements Check.
func (c *Command) Name() string { return string(NameCommand) }

// Target implements Check.
func (c *Command) Target() string { return strings.Join(append([]string{c.path}, c.args...), " ") }

// Run implements Check.
func (c *Command) Run(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, c.path, c.args...)
	out := &tailBuffer{max: commandTailBytes}
	// One writer for both: exec then uses one pipe, and the output keeps
	// the order in which the program wrote it.
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = commandWaitDelay
	ownProcessGroup(cmd)
	start := c.start
	if start == nil {
		start = (*exec.Cmd).Start
	}
	err := start(cmd)
	if err == nil {
		err = cmd.Wait()
	}
	if cmd.Process == nil {
		// It did not start; the error names the path: "fork/exec
		// /etc/nodeready/warmup.sh: permission denied".
		if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.ENOMEM) {
			// The node ran out of processes or memory to start it (a pids limit
			// reached, memory exhausted): the node's fault, not the program's.
			return fmt.Errorf("start %s: the node is out of processes or memory: %w", c.path, err)
		}
		// A program that is not in the image, or cannot run, fails on every node
		// alike.
		return Misconfiguration(err)
	}
	_ = killProcessGroup(cmd) // leftovers; none is the usual case
	if err == nil {
		return nil
	}
	if tail := out.lines(commandTailLines); tail != "" {
		return fmt.Errorf("run %s: %w, output:\n%s", c.path, err, tail)
	}
	return fmt.Errorf("run %s: %w, no output", c.path, err)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	buf []byte
	cut bool // bytes were dropped from the front
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= t.max {
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		t.cut = true
		return n, nil
	}
	if over := len(t.buf) + len(p) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.cut = true
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

// lines returns at most n last lines, trimmed, with "..." first when output
// was left out.
func (t *tailBuffer) lines(n int) string {
	b := bytes.TrimRight(t.buf, " \t\r\n")
	cut := t.cut
	if cut {
		// The first line is a fragment.
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	lines := strings.Split(strings.ToValidUTF8(string(b), "\uFFFD"), "\n")
	if len(lines) > n {
		lines, cut = lines[len(lines)-n:], true
	}
	text := strings.Join(lines, "\n")
	if text == "" {
		return ""
	}
	if cut {
		text = "...\n" + text
	}
	return text
}

// CommandOptions are the command gate's variables.
type CommandOptions struct {
	Path string      `envconfig:"CHECK_COMMAND" desc:"command: absolute path of a program that passes by exiting 0, run without a shell; required when CHECKS has command"`
	Args envvar.List `envconfig:"CHECK_COMMAND_ARGS" desc:"command: its arguments, comma-separated (an argument cannot contain a comma)"`
}

// Validate implements KindOptions.
func (o *CommandOptions) Validate(_ *Options, use Use) error {
	if use.Selected && o.Path == "" {
		return envvar.Required("CHECK_COMMAND", "CHECKS has command: the absolute path of a program, such as /etc/nodeready/warmup.sh")
	}
	if o.Path != "" && !filepath.IsAbs(o.Path) {
		return &envvar.Error{Var: "CHECK_COMMAND", Value: o.Path, Accepted: "use the absolute path of a program, such as /etc/nodeready/warmup.sh (no shell, no PATH lookup, no arguments: those go in CHECK_COMMAND_ARGS)"}
	}
	if len(o.Args) > 0 && o.Path == "" {
		return &envvar.Error{Var: "CHECK_COMMAND_ARGS", Value: o.Args.String(), Accepted: "arguments of CHECK_COMMAND, which is not set"}
	}
	return nil
}

// Checks implements KindOptions.
func (o *CommandOptions) Checks(*Options, Env) []Check {
	return []Check{NewCommand(o.Path, o.Args)}
}
