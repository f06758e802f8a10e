package kubelet

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReadyAfterAnnotation on a simulated pod delays its readiness: a Go duration from the
// moment its containers run, such as "5s". Without it the pod is Ready at once.
const ReadyAfterAnnotation = "kubelet.e2e.nodeready.io/ready-after"

// runSimulatedPod plays a pod that is not an agent pod: its images are pulled, its init
// containers count as completed at once, its containers as running at once and Ready after
// ReadyAfterAnnotation; on deletion they end with exit code 0 at once and the pod is
// deleted, as a real kubelet does after its containers ended.
func (k *Kubelet) runSimulatedPod(ctx context.Context, p *pod) {
	api := p.latest()
	log := k.log.With("pod", api.Namespace+"/"+api.Name, "uid", p.uid, "node", p.node, "simulated", true)
	log.Info("Took pod")
	defer k.status.Add(p.uid)

	delay, err := readyAfter(api)
	if err != nil {
		p.setWaiting("CreateContainerConfigError", err.Error())
		k.status.Add(p.uid)
		k.waitStop(ctx, p, -1)
		k.endPod(ctx, p, log)
		return
	}
	for i := range api.Spec.InitContainers {
		c := &api.Spec.InitContainers[i]
		k.pull(p, c, true)
		p.simulateInit(i)
	}
	for i := range api.Spec.Containers {
		k.pull(p, &api.Spec.Containers[i], false)
	}
	p.setSimulated(true)
	k.status.Add(p.uid)
	log.Info("Started simulated containers", "ready_after", delay)

	if k.waitStop(ctx, p, delay); ctx.Err() == nil && !p.shouldStop() {
		p.setSimulatedReady()
		k.status.Add(p.uid)
		log.Info("Simulated containers ready")
	}
	k.waitStop(ctx, p, -1)
	p.setSimulated(false)
	k.endPod(ctx, p, log)
}

// readyAfter reads ReadyAfterAnnotation.
func readyAfter(api *corev1.Pod) (time.Duration, error) {
	v, ok := api.Annotations[ReadyAfterAnnotation]
	if !ok {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("annotation %s=%q: want a duration such as 5s", ReadyAfterAnnotation, v)
	}
	return d, nil
}

// simulateInit records init container i of a simulated pod as run and completed now.
func (p *pod) simulateInit(i int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	s := &p.initStatuses[i]
	s.ContainerID = fmt.Sprintf("simulated://%s-%s", p.uid, s.Name)
	s.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 0, Reason: "Completed", ContainerID: s.ContainerID,
		StartedAt: metav1.NewTime(now).Rfc3339Copy(), FinishedAt: metav1.NewTime(now).Rfc3339Copy(),
	}}
	s.Ready = true
	p.inits = append(p.inits, InitRun{Container: s.Name, Image: s.Image, Started: now, Finished: now, Simulated: true})
}

// setSimulated starts (true) or ends (false, exit code 0) the simulated containers.
func (p *pod) setSimulated(running bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if running {
		p.simStarted, p.ready, p.waiting = now, false, nil
		p.containerID = fmt.Sprintf("simulated://%s", p.uid)
		if p.firstStart.IsZero() {
			p.firstStart = now
		}
		return
	}
	if p.simStarted.IsZero() {
		return
	}
	p.ends = append(p.ends, corev1.ContainerStateTerminated{
		ExitCode: 0, Reason: "Completed", ContainerID: p.containerID,
		StartedAt:  metav1.NewTime(p.simStarted).Rfc3339Copy(),
		FinishedAt: metav1.NewTime(now).Rfc3339Copy(),
	})
	p.simStarted, p.ready = time.Time{}, false
}

func (p *pod) setSimulatedReady() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.simStarted.IsZero() {
		p.ready = true
	}
}
