// Command pause is the sandbox ("pause") image of the real node in the e2e tests: the process
// that holds a pod's namespaces. It waits for SIGTERM or SIGINT and, as the pod's PID 1 when
// the pod shares its process namespace, reaps orphans.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
