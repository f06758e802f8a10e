package realnode

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

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
