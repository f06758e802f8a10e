package realnode

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nodeready/nodeready/e2e/framework/process"
)

// start runs argv as a daemon of the node, its output appended to <logDir>/<name>.log, in the
// namespaces of the holder process nsPid (none when 0) and in the daemons' cgroup of cgroupRoot,
// with env added to the test's environment.
func start(name, logDir string, nsPid int, cgroupRoot string, env []string, argv ...string) (*process.Process, error) {
	if nsPid != 0 {
		p := strconv.Itoa(nsPid)
		// Without --pid, nsenter execs in place: the daemon is the process started here.
		argv = append([]string{"nsenter", "--net=/proc/" + p + "/ns/net", "--mount=/proc/" + p + "/ns/mnt", "--"}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	pr, err := process.Start(cmd, process.Options{Name: name, LogPath: filepath.Join(logDir, name+".log")})
	if err != nil {
		return nil, err
	}
	if err := joinDaemons(cmd.Process.Pid, cgroupRoot); err != nil {
		pr.Stop(0, nil)
		return nil, err
	}
	return pr, nil
}

// holdNamespaces starts a holder that keeps new namespaces alive: `unshare flags -- sh -c
// setup`, after which the holder touches ready and sleeps. It returns once ready exists; the
// holder is returned even when it did not get there, so the caller's Stop ends it.
func holdNamespaces(name, logDir, cgroupRoot, ready, setup string, flags ...string) (*process.Process, error) {
	script := "touch " + ready + " && exec sleep infinity"
	if setup != "" {
		script = setup + " && " + script
	}
	holder, err := start(name, logDir, 0, cgroupRoot, nil, append(append([]string{"unshare"}, flags...), "--", "sh", "-c", script)...)
	if err != nil {
		return nil, err
	}
	return holder, waitFor(10*time.Second, func() error {
		if err := holder.ExitError(); err != nil {
			return backoffStop{err}
		}
		_, err := os.Stat(ready)
		return err
	})
}
