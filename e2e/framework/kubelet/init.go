package kubelet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// runInitContainers runs the agent pod's init containers one after another, each to a
// successful end, before its container starts, as a kubelet does: each image is pulled just
// before its container starts, and a failed init container is restarted with back-off
// (restartPolicy Always). It returns false when the pod must stop or ctx ends first.
// Sidecars (init containers with restartPolicy Always) are not supported: they are run to
// their end like the others.
func (k *Kubelet) runInitContainers(ctx context.Context, p *pod, dir string, vols map[string]string, log *slog.Logger) bool {
	api := p.latest()
	for i := range api.Spec.InitContainers {
		c := &api.Spec.InitContainers[i]
		backoff := time.Second
		for run := 0; ; run++ {
			if ctx.Err() != nil || p.shouldStop() {
				return false
			}
			k.pull(p, c, true)
			proc, err := k.startInit(ctx, p, api, c, dir, vols, run)
			if err != nil {
				reason := "RunContainerError"
				var se *startError
				if errors.As(err, &se) {
					reason = se.reason
				}
				log.Warn("Could not start init container", "container", c.Name, "reason", reason, "error", err)
				now := time.Now()
				p.initEnded(InitRun{Container: c.Name, Image: c.Image, Code: -1, Started: now, Finished: now})
				p.setInitWaiting(i, reason, err.Error())
				k.status.Add(p.uid)
				k.waitStop(ctx, p, backoff)
				backoff = min(2*backoff, maxRestartBackoff)
				continue
			}
			p.setInitRunning(i, proc, run > 0)
			k.status.Add(p.uid)
			log.Info("Started init container", "container", c.Name, "pid", proc.Cmd.Process.Pid, "run", run+1)

			stopped := k.awaitInit(ctx, p, proc)
			code := proc.ExitCode()
			p.initEnded(InitRun{Container: c.Name, Image: c.Image, Code: code, Started: proc.Started, Finished: proc.Finished})
			p.setInitTerminated(i, proc, code)
			k.status.Add(p.uid)
			log.Info("Init container exited", "container", c.Name, "code", code, "stopped", stopped)
			switch {
			case stopped:
				return false
			case code == 0:
			default:
				p.setInitWaiting(i, "CrashLoopBackOff", fmt.Sprintf("back-off %s restarting failed container", backoff))
				k.status.Add(p.uid)
				k.waitStop(ctx, p, backoff)
				backoff = min(2*backoff, maxRestartBackoff)
				continue
			}
			break
		}
	}
	return true
}

// startInit starts one run of init container c.
func (k *Kubelet) startInit(ctx context.Context, p *pod, api *corev1.Pod, c *corev1.Container, dir string, vols map[string]string, run int) (*process, error) {
	env, err := k.processEnv(ctx, p, api, c, dir)
	if err != nil {
		return nil, err
	}
	m := containerMounts(c, vols)
	m.hostEnv(env)
	bin, args, err := k.commandLine(c, m, env)
	if err != nil {
		return nil, &startError{"RunContainerError", err}
	}
	logPath := filepath.Join(k.opts.LogDir, fmt.Sprintf("%s_%s_%s_%d.log", api.Namespace, api.Name, c.Name, run))
	proc, err := startProcess(bin, args, envList(env), dir, logPath, 0)
	if err != nil {
		return nil, &startError{"RunContainerError", fmt.Errorf("start init container %s of pod %s/%s: %w", c.Name, api.Namespace, api.Name, err)}
	}
	return proc, nil
}

// awaitInit waits until the init container's process ends. When the pod must stop first,
// it terminates the process within the grace period; when ctx ends, it kills it. It reports
// whether the process was stopped rather than ending on its own.
func (k *Kubelet) awaitInit(ctx context.Context, p *pod, proc *process) bool {
	for {
		select {
		case <-proc.Done():
			return false
		case <-ctx.Done():
			proc.Kill()
			return true
		case <-p.changed:
			if !p.shouldStop() {
				continue
			}
			proc.Stop(gracePeriod(p.latest()), ctx.Done())
			return true
		}
	}
}

// initialInitStatuses are the statuses of a pod's init containers before any has run.
func initialInitStatuses(api *corev1.Pod) []corev1.ContainerStatus {
	var list []corev1.ContainerStatus
	for _, c := range api.Spec.InitContainers {
		list = append(list, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image, Started: ptr.To(false),
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}},
		})
	}
	return list
}

func (p *pod) initEnded(run InitRun) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inits = append(p.inits, run)
}

func (p *pod) setInitRunning(i int, proc *process, restart bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := &p.initStatuses[i]
	s.ContainerID = fmt.Sprintf("simulated://%s-%d", p.uid, proc.Cmd.Process.Pid)
	s.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(proc.Started).Rfc3339Copy()}}
	s.Started = ptr.To(true)
	s.Ready = false
	if restart {
		s.RestartCount++
	}
}

func (p *pod) setInitTerminated(i int, proc *process, code int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := &p.initStatuses[i]
	reason := "Completed"
	if code != 0 {
		reason = "Error"
	}
	s.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode:    int32(code),
		Reason:      reason,
		StartedAt:   metav1.NewTime(proc.Started).Rfc3339Copy(),
		FinishedAt:  metav1.NewTime(proc.Finished).Rfc3339Copy(),
		ContainerID: s.ContainerID,
	}}
	s.Started = ptr.To(false)
	s.Ready = code == 0 // an init container that completed counts as ready
}

// setInitWaiting records that init container i waits to be started (again); the run that
// ended before, if any, becomes its last state.
func (p *pod) setInitWaiting(i int, reason, message string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := &p.initStatuses[i]
	if s.State.Terminated != nil {
		s.LastTerminationState = corev1.ContainerState{Terminated: s.State.Terminated}
	}
	s.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}
	s.Ready = false
}

// initialized reports whether every init container has completed. Called with p.mu held.
func (p *pod) initialized() (bool, []string) {
	var pending []string
	for _, s := range p.initStatuses {
		if t := s.State.Terminated; t == nil || t.ExitCode != 0 {
			pending = append(pending, s.Name)
		}
	}
	return len(pending) == 0, pending
}
