package controlplane

func (cp *ControlPlane) controllerManagerArgs() []string {
	p := cp.pki
	// Node IPAM needs a cluster CIDR and a kubelet that uses it: off unless Options.ClusterCIDR.
	controllers := "*,-node-ipam-controller"
	if cp.opts.ClusterCIDR != "" {
		controllers = "*"
	}
	args := append(cp.componentArgs("kube-controller-manager", cp.kcmPort, p.KCMServing),
		// Every default controller, as in a real cluster, so that the node lifecycle,
		// taint eviction and garbage collector controllers write concurrently with the agent.
		"--controllers="+controllers,
		// Each controller acts as its own ServiceAccount, so RBAC applies to it as in kubeadm.
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+p.ServiceAccountKeyFile,
		"--root-ca-file="+p.CA.CertFile,
		"--cluster-signing-cert-file="+p.CA.CertFile,
		"--cluster-signing-key-file="+p.CA.KeyFile,
	)
	if cp.opts.ClusterCIDR != "" {
		// --controllers appends when repeated: it is set above.
		args = append(args, "--allocate-node-cidrs=true", "--cluster-cidr="+cp.opts.ClusterCIDR)
	}
	return append(args, cp.opts.ControllerManagerArgs...)
}

func (cp *ControlPlane) startControllerManager() (err error) {
	cp.kcm, err = cp.startComponent("kube-controller-manager", cp.controllerManagerArgs())
	return err
}
