package kubelet

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRunsToCompletion: a DaemonSet's pod restarts whatever its exit code; a Job's or a Helm
// hook's pod is done after one run (Never) or after a run that succeeded (OnFailure).
func TestRunsToCompletion(t *testing.T) {
	for _, tc := range []struct {
		policy corev1.RestartPolicy
		code   int
		want   bool
	}{
		{corev1.RestartPolicyAlways, 0, false},
		{corev1.RestartPolicyAlways, 1, false},
		{"", 0, false},
		{corev1.RestartPolicyNever, 0, true},
		{corev1.RestartPolicyNever, 1, true},
		{corev1.RestartPolicyOnFailure, 0, true},
		{corev1.RestartPolicyOnFailure, 2, false},
	} {
		assert.Equal(t, tc.want, runsToCompletion(tc.policy, tc.code), "%q exit %d", tc.policy, tc.code)
	}
}

// TestCompletedPodStatus: a pod that ran to completion reports Succeeded or Failed by its exit
// code, its container terminated, while the kubelet keeps it for its owner to read.
func TestCompletedPodStatus(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for code, want := range map[int32]corev1.PodPhase{0: corev1.PodSucceeded, 1: corev1.PodFailed} {
		api := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "hook", Namespace: "kube-system"},
			Spec:       corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "run", Image: "example.com/x:1"}}},
		}
		p := &pod{node: "node-a", uid: "uid-1", api: api, startTime: t0, completed: true,
			ends: []corev1.ContainerStateTerminated{{ExitCode: code, Reason: "Completed"}}}
		s := p.status(corev1.PodStatus{}, t0)
		assert.Equal(t, want, s.Phase, "exit %d", code)
		if assert.Len(t, s.ContainerStatuses, 1) {
			assert.NotNil(t, s.ContainerStatuses[0].State.Terminated)
			assert.False(t, s.ContainerStatuses[0].Ready)
		}
		assert.False(t, p.finished, "a completed pod is not finished until it is deleted")
	}
}
