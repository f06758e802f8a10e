package kubelet

import (
	"net"
	"os/exec"
	"strconv"

	supervisor "github.com/nodeready/nodeready/e2e/framework/process" // process names the type below
)

// process is one run of the agent binary for a pod: the container.
type process struct {
	*supervisor.Process
	metricsPort   int    // the loopback port given as METRICS_PORT
	metricsAddr   string // 127.0.0.1:metricsPort
	containerPort int    // the port the pod spec knows METRICS_PORT as; probes of it go to metricsPort
}

// startProcess runs bin with exactly env (a container does not inherit the host's
// environment), output to logPath, which holds this run's output alone.
func startProcess(bin string, args, env []string, dir, logPath string, metricsPort int) (*process, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Dir = dir
	p, err := supervisor.Start(cmd, supervisor.Options{LogPath: logPath, Fresh: true})
	if err != nil {
		return nil, err
	}
	return &process{
		Process:     p,
		metricsPort: metricsPort,
		metricsAddr: net.JoinHostPort(NodeIP, strconv.Itoa(metricsPort)),
	}, nil
}
