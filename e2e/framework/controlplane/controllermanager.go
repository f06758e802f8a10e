package controlplane

import (
	"path/filepath"
	"strconv"
)

func (cp *ControlPlane) controllerManagerArgs() []string {
	p := cp.pki
	kubeconfig := filepath.Join(cp.workDir, "kube-controller-manager.kubeconfig")
	// Node IPAM needs a cluster CIDR and a kubelet that uses it: off unless Options.ClusterCIDR.
	controllers := "*,-node-ipam-controller"
	if cp.opts.ClusterCIDR != "" {
		controllers = "*"
	}
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(cp.kcmPort),
		"--tls-cert-file=" + p.KCMServing.CertFile,
		"--tls-private-key-file=" + p.KCMServing.KeyFile,
		"--client-ca-file=" + p.CA.CertFile,
		"--leader-elect=false",
		// Every default controller, as in a real cluster, so that the node lifecycle,
		// taint eviction and garbage collector controllers write concurrently with the agent.
		"--controllers=" + controllers,
		// Each controller acts as its own ServiceAccount, so RBAC applies to it as in kubeadm.
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + p.ServiceAccountKeyFile,
		"--root-ca-file=" + p.CA.CertFile,
		"--cluster-signing-cert-file=" + p.CA.CertFile,
		"--cluster-signing-key-file=" + p.CA.KeyFile,
		"--v=2",
	}
	if cp.opts.ClusterCIDR != "" {
		// --controllers appends when repeated: it is set above.
		args = append(args, "--allocate-node-cidrs=true", "--cluster-cidr="+cp.opts.ClusterCIDR)
	}
	return append(args, cp.opts.ControllerManagerArgs...)
}

func (cp *ControlPlane) startControllerManager() error {
	p, err := startProcess("kube-controller-manager", filepath.Join(cp.binDir, "kube-controller-manager"), cp.controllerManagerArgs(), cp.logDir)
	if err != nil {
		return err
	}
	cp.kcm = p
	return nil
}
