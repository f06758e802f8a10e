package kubelet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeready/nodeready/e2e/framework/freeport"
)

const (
	// metricsPortEnv is the agent's port setting; each process gets its own port in it.
	metricsPortEnv = "METRICS_PORT"
	// defaultMetricsPort is the agent's default for METRICS_PORT.
	defaultMetricsPort = 8080
	// defaultGracePeriod is the API's default terminationGracePeriodSeconds.
	defaultGracePeriod = 30 * time.Second
)

// end says why a process run ended.
type end int

const (
	endCrashed   end = iota // exited on its own: restart after a back-off
	endRestart              // killed after failed liveness probes: restart after a back-off
	endStopped              // terminated because the pod is being deleted or is gone
	endAbandoned            // killed because the node was removed or the kubelet stopped
)

// startError is a container that could not be started, with the waiting reason a kubelet
// reports for it.
type startError struct {
	reason string
	err    error
}

func (e *startError) Error() string { return e.err.Error() }
func (e *startError) Unwrap() error { return e.err }

// runPod drives the pod's container until the pod is deleted: start, supervise, restart
// with back-off, terminate. A DaemonSet's pod restarts Always; a pod of a Job or a Helm hook
// (restartPolicy Never, or OnFailure once it exits 0) runs to completion and stays, Succeeded
// or Failed, until it is deleted, as a kubelet keeps it.
func (k *Kubelet) runPod(ctx context.Context, p *pod) {
	api := p.latest()
	log := k.log.With("pod", api.Namespace+"/"+api.Name, "uid", p.uid, "node", p.node)
	log.Info("Took pod")
	defer k.status.Add(p.uid)

	if len(api.Spec.Containers) != 1 {
		p.setWaiting("Unsupported", "the simulated kubelet runs pods of exactly one container")
		k.status.Add(p.uid)
		k.waitStop(ctx, p, -1)
		k.endPod(ctx, p, log)
		return
	}
	dir := filepath.Join(k.root, string(p.uid))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		log.Error("Could not create pod dir", "error", err)
	}
	vols, err := podVolumes(api, dir)
	if err != nil {
		log.Error("Could not create volumes", "error", err)
	}
	if !k.runInitContainers(ctx, p, dir, vols, log) {
		k.endPod(ctx, p, log)
		return
	}

	backoff := time.Second
	for run := 0; ; {
		if ctx.Err() != nil || p.shouldStop() {
			k.endPod(ctx, p, log)
			return
		}
		k.pull(p, &api.Spec.Containers[0], false)
		proc, err := k.startContainer(ctx, p, dir, vols, run)
		if err != nil {
			reason := "RunContainerError"
			var se *startError
			if errors.As(err, &se) {
				reason = se.reason
			}
			log.Warn("Could not start container", "reason", reason, "error", err)
			p.setWaiting(reason, err.Error())
			k.status.Add(p.uid)
			k.waitStop(ctx, p, backoff)
			backoff = min(2*backoff, maxRestartBackoff)
			continue
		}
		p.setRunning(proc, run > 0)
		run++
		k.status.Add(p.uid)
		log.Info("Started container", "pid", proc.Cmd.Process.Pid, "metrics", proc.metricsAddr, "run", run)

		switch k.supervise(ctx, p, proc, log) {
		case endStopped, endAbandoned:
			k.endPod(ctx, p, log)
			return
		case endCrashed:
			if runsToCompletion(api.Spec.RestartPolicy, proc.ExitCode()) {
				p.mu.Lock()
				p.completed = true
				p.mu.Unlock()
				k.status.Add(p.uid)
				log.Info("Pod ran to completion", "code", proc.ExitCode())
				k.waitStop(ctx, p, -1)
				k.endPod(ctx, p, log)
				return
			}
		}
		p.setWaiting("CrashLoopBackOff", fmt.Sprintf("back-off %s restarting failed container", backoff))
		k.status.Add(p.uid)
		k.waitStop(ctx, p, backoff)
		backoff = min(2*backoff, maxRestartBackoff)
	}
}

// startContainer resolves the container's environment and command, writes its credentials
// and starts the process.
func (k *Kubelet) startContainer(ctx context.Context, p *pod, dir string, vols map[string]string, run int) (*process, error) {
	api := p.latest()
	c := &api.Spec.Containers[0]
	env, err := k.processEnv(ctx, p, api, c, dir)
	if err != nil {
		return nil, err
	}

	// The process believes it listens on its configured port, as in its own network
	// namespace; it really listens on a free loopback port, and probes go there.
	containerPort := defaultMetricsPort
	if v, ok := env[metricsPortEnv]; ok {
		if containerPort, err = strconv.Atoi(v); err != nil {
			return nil, &startError{"CreateContainerConfigError", fmt.Errorf("%s=%q is not a port: %w", metricsPortEnv, v, err)}
		}
	}
	port, err := freeport.Port()
	if err != nil {
		return nil, &startError{"RunContainerError", err}
	}
	env[metricsPortEnv] = strconv.Itoa(port)

	m := containerMounts(c, vols)
	m.hostEnv(env)
	bin, args, err := k.commandLine(c, m, env)
	if err != nil {
		return nil, &startError{"RunContainerError", err}
	}
	logPath := filepath.Join(k.opts.LogDir, fmt.Sprintf("%s_%s_%d.log", api.Namespace, api.Name, run))
	proc, err := startProcess(bin, args, envList(env), dir, logPath, port)
	if err != nil {
		return nil, &startError{"RunContainerError", fmt.Errorf("start agent for pod %s/%s: %w", api.Namespace, api.Name, err)}
	}
	proc.containerPort = containerPort
	return proc, nil
}

// supervise watches a running process and its probes until it ends, the pod must stop, or
// ctx ends.
func (k *Kubelet) supervise(ctx context.Context, p *pod, proc *process, log *slog.Logger) end {
	c := p.latest().Spec.Containers[0]
	probeCtx, stopProbes := context.WithCancel(ctx)
	unhealthy := make(chan struct{}, 1)
	var probes sync.WaitGroup
	probes.Go(func() { k.probe(probeCtx, p, &c, proc, unhealthy) })
	defer func() {
		stopProbes()
		probes.Wait()
	}()

	for {
		select {
		case <-proc.Done():
			k.recordExit(p, proc, false, false, log)
			return endCrashed
		case <-unhealthy:
			log.Warn("Liveness probe failed, restarting container")
			killed := proc.Stop(gracePeriod(p.latest()), ctx.Done())
			if ctx.Err() != nil {
				p.setRunning(nil, false)
				return endAbandoned
			}
			k.recordExit(p, proc, true, killed, log)
			return endRestart
		case <-p.changed:
			if !p.shouldStop() {
				continue
			}
			select {
			case <-proc.Done(): // it ended on its own just before
				k.recordExit(p, proc, false, false, log)
				return endStopped
			default:
			}
			grace := gracePeriod(p.latest())
			log.Info("Stopping container", "grace", grace)
			killed := proc.Stop(grace, ctx.Done())
			if ctx.Err() != nil {
				p.setRunning(nil, false)
				return endAbandoned
			}
			k.recordExit(p, proc, true, killed, log)
			return endStopped
		case <-ctx.Done():
			proc.Kill()
			p.setRunning(nil, false)
			log.Info("Killed container: node removed or kubelet stopped")
			return endAbandoned
		}
	}
}

// runsToCompletion says whether a container that exited with code is done for good under
// the pod's restart policy.
func runsToCompletion(policy corev1.RestartPolicy, code int) bool {
	switch policy {
	case corev1.RestartPolicyNever:
		return true
	case corev1.RestartPolicyOnFailure:
		return code == 0
	}
	return false
}

// waitStop waits for d (forever when d < 0), or less when the pod must stop or ctx ends.
func (k *Kubelet) waitStop(ctx context.Context, p *pod, d time.Duration) {
	var timeout <-chan time.Time
	if d >= 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	for !p.shouldStop() {
		select {
		case <-ctx.Done():
			return
		case <-timeout:
			return
		case <-p.changed:
		}
	}
}

// endPod marks the pod finished, so that the status manager reports the final status and
// deletes the pod, or abandoned when the kubelet is going away.
func (k *Kubelet) endPod(ctx context.Context, p *pod, log *slog.Logger) {
	p.mu.Lock()
	if ctx.Err() != nil {
		p.abandoned = true
	} else {
		p.finished = true
	}
	p.mu.Unlock()
	k.status.Add(p.uid)
	log.Info("Finished pod", "abandoned", ctx.Err() != nil)
}

// recordExit notes how a process ended, for the pod's status and for tests.
func (k *Kubelet) recordExit(p *pod, proc *process, signaled, killed bool, log *slog.Logger) {
	api := p.latest()
	e := Exit{
		Node: p.node, Namespace: api.Namespace, Pod: api.Name, UID: p.uid,
		Code: proc.ExitCode(), Signaled: signaled, Killed: killed, At: proc.Finished,
	}
	reason := "Completed"
	if e.Code != 0 {
		reason = "Error"
	}
	p.mu.Lock()
	p.exits = append(p.exits, e)
	p.ends = append(p.ends, corev1.ContainerStateTerminated{
		ExitCode:    int32(e.Code),
		Reason:      reason,
		StartedAt:   metav1.NewTime(proc.Started).Rfc3339Copy(),
		FinishedAt:  metav1.NewTime(proc.Finished).Rfc3339Copy(),
		ContainerID: p.containerID,
	})
	p.proc, p.ready = nil, false
	p.mu.Unlock()
	k.status.Add(p.uid)
	log.Info("Container exited", "code", e.Code, "signaled", signaled, "killed", killed)
}

// gracePeriod is how long a terminating container may take: the deletion's grace period,
// else the pod's terminationGracePeriodSeconds.
func gracePeriod(api *corev1.Pod) time.Duration {
	switch {
	case api.DeletionGracePeriodSeconds != nil:
		return time.Duration(*api.DeletionGracePeriodSeconds) * time.Second
	case api.Spec.TerminationGracePeriodSeconds != nil:
		return time.Duration(*api.Spec.TerminationGracePeriodSeconds) * time.Second
	default:
		return defaultGracePeriod
	}
}

func (p *pod) setWaiting(reason, message string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waiting = &corev1.ContainerStateWaiting{Reason: reason, Message: message}
}

// setRunning records the running process (nil once it is gone); restart counts it as a
// restart of the container.
func (p *pod) setRunning(proc *process, restart bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.proc, p.ready = proc, false
	if proc == nil {
		return
	}
	if p.firstStart.IsZero() {
		p.firstStart = proc.Started
	}
	p.waiting = nil
	p.containerID = fmt.Sprintf("simulated://%s-%d", p.uid, proc.Cmd.Process.Pid)
	if restart {
		p.restarts++
	}
}

// setReady records the readiness probe's verdict and reports whether it changed.
func (p *pod) setReady(ready bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc == nil || p.ready == ready {
		return false
	}
	p.ready = ready
	return true
}
