package checks

import (
	"os/exec"
	"time"
)

// NewCommandStartedBy is NewCommand whose program start stands in for
// (*exec.Cmd).Start: a test makes the fork fail as the kernel does when the node
// is out of processes or memory, which it cannot make the kernel do.
func NewCommandStartedBy(path string, args []string, start func(*exec.Cmd) error) *Command {
	c := NewCommand(path, args)
	c.start = start
	return c
}

// NewNetworkPolicyWaiting is NewNetworkPolicy whose blocked connection counts as
// blocked after wait unanswered, so a test of a dropped connection is quick.
func NewNetworkPolicyWaiting(c *NetworkPolicy, wait time.Duration) *NetworkPolicy {
	c.wait = wait
	return c
}

// NewNetworkPolicyProgramming is NewNetworkPolicy whose connection that opens is
// tried again for program (networkPolicyProgramWait).
func NewNetworkPolicyProgramming(c *NetworkPolicy, program time.Duration) *NetworkPolicy {
	c.program = program
	return c
}
