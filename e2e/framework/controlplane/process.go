package controlplane

import (
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/nodeready/nodeready/e2e/framework/process"
)

// componentArgs are the flags kube-controller-manager and kube-scheduler share: the
// kubeconfig Start wrote for them (<workDir>/<name>.kubeconfig), also for delegated
// authentication and authorization, their serving certificate on loopback, and no leader
// election.
func (cp *ControlPlane) componentArgs(name string, port int, serving *keyPair) []string {
	kubeconfig := filepath.Join(cp.workDir, name+".kubeconfig")
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + serving.CertFile,
		"--tls-private-key-file=" + serving.KeyFile,
		"--client-ca-file=" + cp.pki.CA.CertFile,
		"--leader-elect=false",
		"--v=2",
	}
}

// startComponent runs the binary name of BinDir with args, appending its stdout and stderr
// to <LogDir>/<name>.log, which a restart (RestartAPIServer) appends to again.
func (cp *ControlPlane) startComponent(name string, args []string) (*process.Process, error) {
	return process.Start(exec.Command(filepath.Join(cp.binDir, name), args...), process.Options{Name: name, LogPath: filepath.Join(cp.logDir, name+".log")})
}
