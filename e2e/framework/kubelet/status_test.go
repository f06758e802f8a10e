package kubelet

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	supervisor "github.com/nodeready/nodeready/e2e/framework/process" // process names the type below
)

func TestPodStatus(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)
	scheduled := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)}
	p := &pod{node: "node-a", uid: "uid-1", api: agentPod(), startTime: t0}
	old := corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBurstable, Conditions: []corev1.PodCondition{scheduled}}

	// Taken on, not started yet.
	s := p.status(old, t0)
	assert.Equal(t, corev1.PodPending, s.Phase)
	assert.Equal(t, corev1.PodQOSBurstable, s.QOSClass, "fields of other writers stay")
	assert.Contains(t, s.Conditions, scheduled, "fields of other writers stay")
	assert.Equal(t, NodeIP, s.PodIP)
	assert.Equal(t, metav1.NewTime(t0.Truncate(time.Second)), *s.StartTime, "API times have whole seconds")
	require.Len(t, s.ContainerStatuses, 1)
	assert.Equal(t, "ContainerCreating", s.ContainerStatuses[0].State.Waiting.Reason)
	assert.Equal(t, corev1.ConditionFalse, conditionOf(s, corev1.PodReady))

	// Running, not ready yet.
	t1 := t0.Add(time.Second)
	p.setRunning(fakeProc(41, t1, time.Time{}), false)
	s = p.status(s, t1)
	assert.Equal(t, corev1.PodRunning, s.Phase)
	cs := s.ContainerStatuses[0]
	require.NotNil(t, cs.State.Running)
	assert.True(t, *cs.Started)
	assert.False(t, cs.Ready)
	assert.Equal(t, corev1.ConditionFalse, conditionOf(s, corev1.ContainersReady))

	// Ready: the Ready condition changes, and with it its transition time.
	t2 := t1.Add(time.Second)
	require.True(t, p.setReady(true))
	require.False(t, p.setReady(true), "no change, nothing to write")
	s = p.status(s, t2)
	assert.True(t, s.ContainerStatuses[0].Ready)
	assert.Equal(t, corev1.ConditionTrue, conditionOf(s, corev1.PodReady))
	assert.Equal(t, metav1.NewTime(t2.Truncate(time.Second)), transitionOf(s, corev1.PodReady))
	assert.Equal(t, metav1.NewTime(t0.Truncate(time.Second)), transitionOf(s, corev1.PodInitialized), "unchanged condition keeps its time")

	// Crashed and restarted: the last state shows the crash.
	p.mu.Lock()
	p.ends = append(p.ends, corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"})
	p.proc = nil
	p.mu.Unlock()
	p.setRunning(fakeProc(42, t2, time.Time{}), true)
	s = p.status(s, t2)
	cs = s.ContainerStatuses[0]
	assert.EqualValues(t, 1, cs.RestartCount)
	assert.False(t, cs.Ready, "a restarted container is not ready until its probe passes")
	require.NotNil(t, cs.LastTerminationState.Terminated)
	assert.EqualValues(t, 1, cs.LastTerminationState.Terminated.ExitCode)

	// Terminated after the pod's deletion, exit 0.
	p.mu.Lock()
	p.ends = append(p.ends, corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"})
	p.proc, p.finished = nil, true
	p.mu.Unlock()
	s = p.status(s, t2)
	assert.Equal(t, corev1.PodSucceeded, s.Phase)
	cs = s.ContainerStatuses[0]
	require.NotNil(t, cs.State.Terminated)
	assert.Equal(t, "Completed", cs.State.Terminated.Reason)
	assert.EqualValues(t, 1, cs.LastTerminationState.Terminated.ExitCode)
	assert.Equal(t, corev1.ConditionFalse, conditionOf(s, corev1.PodReadyToStartContainers))
	assert.Equal(t, corev1.ConditionFalse, conditionOf(s, corev1.PodReady))
}

func conditionOf(s corev1.PodStatus, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}

func transitionOf(s corev1.PodStatus, t corev1.PodConditionType) metav1.Time {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c.LastTransitionTime
		}
	}
	return metav1.Time{}
}

// fakeProc stands for a process with the given pid, started (and finished, unless zero) at
// the given times: all that status reads of it.
func fakeProc(pid int, started, finished time.Time) *process {
	cmd := &exec.Cmd{Process: &os.Process{Pid: pid}}
	return &process{Process: &supervisor.Process{Cmd: cmd, Started: started, Finished: finished}}
}
