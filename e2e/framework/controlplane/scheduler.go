package controlplane

import (
	"path/filepath"
	"strconv"
)

func (cp *ControlPlane) schedulerArgs() []string {
	p := cp.pki
	kubeconfig := filepath.Join(cp.workDir, "kube-scheduler.kubeconfig")
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(cp.schedulerPort),
		"--tls-cert-file=" + p.SchServing.CertFile,
		"--tls-private-key-file=" + p.SchServing.KeyFile,
		"--client-ca-file=" + p.CA.CertFile,
		"--leader-elect=false",
		"--v=2",
	}
	return append(args, cp.opts.SchedulerArgs...)
}

func (cp *ControlPlane) startScheduler() error {
	p, err := startProcess("kube-scheduler", filepath.Join(cp.binDir, "kube-scheduler"), cp.schedulerArgs(), cp.logDir)
	if err != nil {
		return err
	}
	cp.scheduler = p
	return nil
}
