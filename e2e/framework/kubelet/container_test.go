package kubelet

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestIsAgentImage(t *testing.T) {
	k := &Kubelet{}
	for image, want := range map[string]bool{
		"ghcr.io/nodeready/nodeready:latest":         true,
		"ghcr.io/nodeready/nodeready:v0.1.0":         true,
		"ghcr.io/nodeready/nodeready":                true,
		"ghcr.io/nodeready/nodeready@sha256:0123abc": true,
		"ghcr.io/nodeready/nodeready-cni:latest":     false,
		"registry.k8s.io/pause:3.10":                 false,
		"localhost:5000/nodeready":                   false,
	} {
		assert.Equal(t, want, k.isAgentImage(image), image)
	}
	k.opts.AgentImage = "localhost:5000/nodeready"
	assert.True(t, k.isAgentImage("localhost:5000/nodeready:dev"))
	assert.False(t, k.isAgentImage("ghcr.io/nodeready/nodeready:latest"))
}

// The init containers of manifests/variants/prepull/daemonset-prepull.yaml.
func TestCommandLineOfPrepullInitContainers(t *testing.T) {
	k := &Kubelet{opts: Options{AgentBinary: "/build/bin/nodeready"}}
	vols := map[string]string{"nodeready-bin": "/tmp/pod/volumes/nodeready-bin"}
	copyBinary := corev1.Container{
		Name: "nodeready-bin", Image: "ghcr.io/nodeready/nodeready:v0.1.0",
		Args:         []string{"copy-binary", "/nodeready-bin/nodeready"},
		VolumeMounts: []corev1.VolumeMount{{Name: "nodeready-bin", MountPath: "/nodeready-bin"}},
	}
	warm := corev1.Container{
		Name: "warm-example", Image: "registry.k8s.io/pause:3.10",
		Command:      []string{"/nodeready-bin/nodeready", "noop"},
		VolumeMounts: []corev1.VolumeMount{{Name: "nodeready-bin", MountPath: "/nodeready-bin", ReadOnly: true}},
	}

	bin, args, err := k.commandLine(&copyBinary, containerMounts(&copyBinary, vols), nil)
	require.NoError(t, err)
	assert.Equal(t, "/build/bin/nodeready", bin, "the agent image's entrypoint")
	assert.Equal(t, []string{"copy-binary", filepath.Join(vols["nodeready-bin"], "nodeready")}, args)

	bin, args, err = k.commandLine(&warm, containerMounts(&warm, vols), nil)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(vols["nodeready-bin"], "nodeready"), bin, "the copy in the emptyDir")
	assert.Equal(t, []string{"noop"}, args)
}

func TestCommandLine(t *testing.T) {
	k := &Kubelet{opts: Options{AgentBinary: "/build/bin/nodeready"}}
	vols := map[string]string{"tools": "/host/tools", "data": "/host/data"}
	env := map[string]string{"DIR": "/tools/sub"}
	tests := []struct {
		name    string
		c       corev1.Container
		bin     string
		args    []string
		wantErr string
	}{
		{
			name: "agent image without command runs the agent",
			c:    corev1.Container{Name: "a", Image: "ghcr.io/nodeready/nodeready:v1", Args: []string{"--dry-run"}},
			bin:  "/build/bin/nodeready", args: []string{"--dry-run"},
		},
		{
			name: "agent image with its entrypoint as command",
			c:    corev1.Container{Name: "a", Image: "ghcr.io/nodeready/nodeready:v1", Command: []string{"/nodeready", "noop"}},
			bin:  "/build/bin/nodeready", args: []string{"noop"},
		},
		{
			name: "nested mount wins, variables expanded",
			c: corev1.Container{Name: "a", Image: "busybox", Command: []string{"$(DIR)/run", "/tools/x", "/tools/sub", "/data"},
				VolumeMounts: []corev1.VolumeMount{{Name: "tools", MountPath: "/tools"}, {Name: "data", MountPath: "/tools/sub"}}},
			bin: "/host/data/run", args: []string{"/host/tools/x", "/host/data", "/data"},
		},
		{
			name:    "another image without command",
			c:       corev1.Container{Name: "a", Image: "registry.k8s.io/pause:3.10"},
			wantErr: "the entrypoint of image registry.k8s.io/pause:3.10 cannot run here",
		},
		{
			name:    "a program outside the volumes",
			c:       corev1.Container{Name: "a", Image: "busybox", Command: []string{"/bin/cp", "a", "b"}},
			wantErr: `exec "/bin/cp": no such file in image busybox`,
		},
		{
			name: "a path that only starts like a mount",
			c: corev1.Container{Name: "a", Image: "busybox", Command: []string{"/toolsx/run"},
				VolumeMounts: []corev1.VolumeMount{{Name: "tools", MountPath: "/tools"}}},
			wantErr: "no such file",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin, args, err := k.commandLine(&tt.c, containerMounts(&tt.c, vols), env)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.bin, bin)
			assert.Equal(t, tt.args, args)
		})
	}
}

func TestPodStatusWithInitContainers(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	api := agentPod()
	api.Spec.InitContainers = []corev1.Container{{Name: "copy", Image: "ghcr.io/nodeready/nodeready:v0.1.0"}, {Name: "warm", Image: "pause"}}
	p := &pod{node: "node-a", uid: "uid-1", api: api, startTime: t0, initStatuses: initialInitStatuses(api)}

	s := p.status(corev1.PodStatus{}, t0)
	assert.Equal(t, corev1.PodPending, s.Phase)
	assert.Equal(t, corev1.ConditionFalse, conditionOf(s, corev1.PodInitialized))
	require.Len(t, s.InitContainerStatuses, 2)
	assert.Equal(t, "PodInitializing", s.ContainerStatuses[0].State.Waiting.Reason)

	p.setInitRunning(0, fakeProc(40, t0, time.Time{}), false)
	s = p.status(s, t0)
	require.NotNil(t, s.InitContainerStatuses[0].State.Running)

	// The first fails and is restarted; then both complete.
	p.setInitTerminated(0, fakeProc(40, t0, t0), 1)
	p.setInitWaiting(0, "CrashLoopBackOff", "back-off")
	s = p.status(s, t0)
	assert.Equal(t, "CrashLoopBackOff", s.InitContainerStatuses[0].State.Waiting.Reason)
	assert.EqualValues(t, 1, s.InitContainerStatuses[0].LastTerminationState.Terminated.ExitCode)
	assert.Equal(t, corev1.ConditionFalse, conditionOf(s, corev1.PodInitialized))

	for i := range 2 {
		p.setInitRunning(i, fakeProc(41+i, t0, time.Time{}), i == 0)
		p.setInitTerminated(i, fakeProc(41+i, t0, t0), 0)
	}
	s = p.status(s, t0)
	assert.Equal(t, corev1.ConditionTrue, conditionOf(s, corev1.PodInitialized))
	assert.EqualValues(t, 1, s.InitContainerStatuses[0].RestartCount)
	assert.True(t, s.InitContainerStatuses[1].Ready, "completed init containers count as ready")
	assert.Equal(t, "ContainerCreating", s.ContainerStatuses[0].State.Waiting.Reason)
	assert.Equal(t, corev1.PodPending, s.Phase)
}

func TestSimulatedPodStatus(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	api := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "cni-x", Namespace: "kube-system", Annotations: map[string]string{ReadyAfterAnnotation: "3s"}},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "install", Image: "example.com/cni-install:1"}},
			Containers:     []corev1.Container{{Name: "agent", Image: "example.com/cni:1"}, {Name: "monitor", Image: "example.com/cni-monitor:1"}},
		},
	}
	d, err := readyAfter(api)
	require.NoError(t, err)
	assert.Equal(t, 3*time.Second, d)
	p := &pod{node: "node-a", uid: "uid-2", api: api, startTime: t0, simulated: true, initStatuses: initialInitStatuses(api)}

	p.simulateInit(0)
	p.setSimulated(true)
	s := p.status(corev1.PodStatus{}, t0)
	assert.Equal(t, corev1.PodRunning, s.Phase)
	assert.Equal(t, corev1.ConditionTrue, conditionOf(s, corev1.PodInitialized))
	assert.Equal(t, corev1.ConditionFalse, conditionOf(s, corev1.PodReady))
	require.Len(t, s.ContainerStatuses, 2)
	assert.NotEqual(t, s.ContainerStatuses[0].ContainerID, s.ContainerStatuses[1].ContainerID)

	p.setSimulatedReady()
	s = p.status(s, t0)
	assert.Equal(t, corev1.ConditionTrue, conditionOf(s, corev1.PodReady))
	assert.True(t, s.ContainerStatuses[1].Ready)

	p.setSimulated(false)
	p.mu.Lock()
	p.finished = true
	p.mu.Unlock()
	s = p.status(s, t0)
	assert.Equal(t, corev1.PodSucceeded, s.Phase)
	assert.Equal(t, "Completed", s.ContainerStatuses[0].State.Terminated.Reason)
	assert.Equal(t, corev1.ConditionFalse, conditionOf(s, corev1.PodReady))

	for _, bad := range []string{"soon", "-1s"} {
		api.Annotations[ReadyAfterAnnotation] = bad
		_, err := readyAfter(api)
		assert.ErrorContains(t, err, ReadyAfterAnnotation)
	}
}

func TestConditionOverridesKeepTransitionTime(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(10 * time.Second))
	overrides := []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "SetByTest"},
		{Type: "example.com/NetworkReady", Status: corev1.ConditionTrue, Reason: "SetByTest"},
	}
	first := setConditions(nil, withOverrides(healthyConditions(), overrides), t0)
	second := setConditions(first, withOverrides(healthyConditions(), overrides), t1)
	require.Len(t, second, 5)
	for _, c := range second {
		assert.Equal(t, t1, c.LastHeartbeatTime, "%s heartbeat", c.Type)
		assert.Equal(t, t0, c.LastTransitionTime, "%s kept its status, so its transition time", c.Type)
	}
	assert.Equal(t, corev1.ConditionFalse, second[3].Status, "Ready as the test set it")
	assert.Equal(t, corev1.NodeConditionType("example.com/NetworkReady"), second[4].Type)
}
