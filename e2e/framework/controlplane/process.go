package controlplane

import (
	"os/exec"
	"path/filepath"

	"github.com/nodeready/nodeready/e2e/framework/process"
)

// startProcess runs bin with args, appending its stdout and stderr to <logDir>/<name>.log,
// which a restart (RestartAPIServer) appends to again.
func startProcess(name, bin string, args []string, logDir string) (*process.Process, error) {
	return process.Start(exec.Command(bin, args...), process.Options{Name: name, LogPath: filepath.Join(logDir, name+".log")})
}
