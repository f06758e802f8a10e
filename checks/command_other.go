//go:build !unix

package checks

import "os/exec"

// ownProcessGroup leaves cmd as it is: without process groups, cancelling it
// kills the program only.
func ownProcessGroup(*exec.Cmd) {}

// killProcessGroup has nothing to kill without process groups.
func killProcessGroup(*exec.Cmd) error { return nil }
