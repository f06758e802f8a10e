package kubelet

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// runStatusManager writes pod status and deletes finished pods, one pod at a time from the
// status queue, retrying failures with back-off (the API server may be down) until ctx ends.
func (k *Kubelet) runStatusManager(ctx context.Context) {
	k.wg.Go(func() {
		<-ctx.Done()
		k.status.ShutDown()
	})
	for {
		uid, quit := k.status.Get()
		if quit {
			return
		}
		if err := k.syncPod(ctx, uid); err != nil && ctx.Err() == nil {
			k.log.Warn("Could not sync pod status", "uid", uid, "error", err)
			k.status.AddRateLimited(uid)
		} else {
			k.status.Forget(uid)
		}
		k.status.Done(uid)
	}
}

// syncPod brings the pod's status in the API up to date and, once the kubelet is finished
// with the pod, deletes it as a kubelet does: grace period 0, only this UID.
func (k *Kubelet) syncPod(ctx context.Context, uid types.UID) error {
	k.mu.Lock()
	p := k.pods[uid]
	k.mu.Unlock()
	if p == nil {
		return nil
	}
	p.mu.Lock()
	skip := p.removed || p.abandoned || p.deleted
	p.mu.Unlock()
	if skip {
		return nil
	}

	if err := k.writeStatus(ctx, p); err != nil {
		return err
	}

	p.mu.Lock()
	finished, removed := p.finished, p.removed
	p.mu.Unlock()
	if !finished || removed {
		return nil
	}
	api := p.latest()
	err := k.client.CoreV1().Pods(api.Namespace).Delete(ctx, api.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      metav1.NewUIDPreconditions(string(uid)),
	})
	// Conflict: the UID precondition failed, so this pod is gone and another took its name.
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete pod %s/%s: %w", api.Namespace, api.Name, err)
	}
	p.mu.Lock()
	p.deleted = true
	p.mu.Unlock()
	k.log.Info("Deleted pod", "pod", api.Namespace+"/"+api.Name, "uid", uid)
	return nil
}

// writeStatus writes the pod's status when it differs from what the API holds.
func (k *Kubelet) writeStatus(ctx context.Context, p *pod) error {
	api := p.latest()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		want := p.status(api.Status, time.Now())
		if equality.Semantic.DeepEqual(api.Status, want) {
			return nil
		}
		upd := api.DeepCopy()
		upd.Status = want
		_, err := k.client.CoreV1().Pods(api.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{})
		switch {
		case err == nil:
			k.log.Debug("Updated pod status", "pod", api.Namespace+"/"+api.Name, "phase", want.Phase)
		case apierrors.IsConflict(err):
			fresh, gerr := k.client.CoreV1().Pods(api.Namespace).Get(ctx, api.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(gerr) || (gerr == nil && fresh.UID != p.uid) {
				return nil // deleted meanwhile; the informer tells the worker
			}
			if gerr != nil {
				return gerr
			}
			api = fresh
		case apierrors.IsNotFound(err):
			return nil
		case apierrors.IsInvalid(err):
			// A status the API server refuses does not become valid by retrying.
			k.log.Error("Pod status refused", "pod", api.Namespace+"/"+api.Name, "error", err)
			return nil
		}
		return err
	})
}

// status computes the pod's status from the container's state, on top of old (the status in
// the API), so that fields other writers own (PodScheduled, qosClass) stay.
func (p *pod) status(old corev1.PodStatus, now time.Time) corev1.PodStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	api := p.api
	s := *old.DeepCopy()
	ts := metav1.NewTime(now).Rfc3339Copy()

	s.HostIP, s.HostIPs = NodeIP, []corev1.HostIP{{IP: NodeIP}}
	s.PodIP, s.PodIPs = NodeIP, []corev1.PodIP{{IP: NodeIP}}
	if s.StartTime == nil {
		s.StartTime = ptr.To(metav1.NewTime(p.startTime).Rfc3339Copy())
	}

	state, started, ready := p.containerState()
	var lastState corev1.ContainerState
	switch last := len(p.ends) - 1; {
	case state.Terminated != nil && last > 0:
		lastState.Terminated = &p.ends[last-1]
	case state.Terminated == nil && last >= 0:
		lastState.Terminated = &p.ends[last]
	}
	s.ContainerStatuses = nil
	var unready []string
	for i := range api.Spec.Containers {
		c := &api.Spec.Containers[i]
		s.ContainerStatuses = append(s.ContainerStatuses, corev1.ContainerStatus{
			Name:                 c.Name,
			Image:                c.Image,
			ImageID:              c.Image,
			ContainerID:          p.containerIDOf(c),
			RestartCount:         int32(p.restarts),
			Ready:                ready,
			Started:              ptr.To(started),
			State:                state,
			LastTerminationState: lastState,
		})
		if !ready {
			unready = append(unready, c.Name)
		}
	}
	s.InitContainerStatuses = nil
	for _, is := range p.initStatuses {
		s.InitContainerStatuses = append(s.InitContainerStatuses, *is.DeepCopy())
	}

	last := len(p.ends) - 1
	switch {
	case (p.finished || p.completed) && last >= 0 && p.ends[last].ExitCode == 0:
		s.Phase = corev1.PodSucceeded
	case p.finished || p.completed:
		s.Phase = corev1.PodFailed
	case started || last >= 0:
		s.Phase = corev1.PodRunning
	default:
		s.Phase = corev1.PodPending
	}

	notReady := "containers with unready status: [" + strings.Join(unready, " ") + "]"
	podReady := condition(corev1.PodReady, ready, "ContainersNotReady", notReady)
	containersReady := condition(corev1.ContainersReady, ready, "ContainersNotReady", notReady)
	sandbox := condition(corev1.PodReadyToStartContainers, !p.finished && !p.completed, "", "")
	initDone, pending := p.initialized()
	initialized := condition(corev1.PodInitialized, initDone, "ContainersNotInitialized",
		"containers with incomplete status: ["+strings.Join(pending, " ")+"]")
	for _, want := range []corev1.PodCondition{sandbox, initialized, containersReady, podReady} {
		s.Conditions = setCondition(s.Conditions, want, ts)
	}
	return s
}

func condition(t corev1.PodConditionType, ok bool, reason, message string) corev1.PodCondition {
	if ok {
		return corev1.PodCondition{Type: t, Status: corev1.ConditionTrue}
	}
	return corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, Reason: reason, Message: message}
}

// setCondition puts want into conds, keeping the transition time while the status stays.
func setCondition(conds []corev1.PodCondition, want corev1.PodCondition, now metav1.Time) []corev1.PodCondition {
	for i := range conds {
		if conds[i].Type != want.Type {
			continue
		}
		if conds[i].Status == want.Status {
			want.LastTransitionTime = conds[i].LastTransitionTime
		} else {
			want.LastTransitionTime = now
		}
		want.LastProbeTime = conds[i].LastProbeTime
		want.ObservedGeneration = conds[i].ObservedGeneration
		conds[i] = want
		return conds
	}
	want.LastTransitionTime = now
	return append(conds, want)
}

// containerState is the state every main container of the pod reports now, the started
// flag, and readiness. Called with p.mu held.
func (p *pod) containerState() (corev1.ContainerState, bool, bool) {
	last := len(p.ends) - 1
	switch {
	case (p.finished || p.completed) && last >= 0:
		return corev1.ContainerState{Terminated: &p.ends[last]}, false, false
	case p.proc != nil:
		return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(p.proc.Started).Rfc3339Copy()}}, true, p.ready
	case !p.simStarted.IsZero():
		return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(p.simStarted).Rfc3339Copy()}}, true, p.ready
	case p.waiting != nil:
		return corev1.ContainerState{Waiting: p.waiting}, false, false
	}
	if done, _ := p.initialized(); !done {
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}, false, false
	}
	return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}, false, false
}

// containerID is the ID container c reports. Called with p.mu held.
func (p *pod) containerIDOf(c *corev1.Container) string {
	if p.simulated && p.containerID != "" {
		return p.containerID + "-" + c.Name
	}
	return p.containerID
}
