package checks

import "os/exec"

// NewCommandStartedBy is NewCommand whose program start stands in for
// (*exec.Cmd).Start: a test makes the fork fail as the kernel does when the node
// is out of processes or memory, which it cannot make the kernel do.
func NewCommandStartedBy(path string, args []string, start func(*exec.Cmd) error) *Command {
	c := NewCommand(path, args)
	c.start = start
	return c
}
