package realnode

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockPath serializes real nodes on a machine: they share fixed names, addresses and
// CgroupRoot. The kernel releases the lock when its holder exits, however it exits.
const lockPath = "/tmp/nodeready-realnode.lock"

// lockMachine waits until no other real node runs on this machine and returns the lock.
func lockMachine() (*os.File, error) {
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("real node lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("real node lock: %w", err)
	}
	return f, nil
}

// lockCleanMachine takes the machine's lock and clears what a previous real node, stopped
// before it could clean up, left behind: its network, cgroups, tunables and work folders.
func lockCleanMachine() (*os.File, error) {
	lock, err := lockMachine()
	if err != nil {
		return nil, err
	}
	teardownNetwork()
	if err := errors.Join(cleanCgroups(CgroupRoot), restoreTunables(), removeWorkDirs()); err != nil {
		lock.Close()
		return nil, fmt.Errorf("clean up a previous real node: %w", err)
	}
	return lock, nil
}
