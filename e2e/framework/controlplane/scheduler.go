package controlplane

func (cp *ControlPlane) schedulerArgs() []string {
	args := cp.componentArgs("kube-scheduler", cp.schedulerPort, cp.pki.SchServing)
	return append(args, cp.opts.SchedulerArgs...)
}

func (cp *ControlPlane) startScheduler() (err error) {
	cp.scheduler, err = cp.startComponent("kube-scheduler", cp.schedulerArgs())
	return err
}
