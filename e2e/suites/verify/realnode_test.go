package verify

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/realnode"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// missingName is a name the cluster DNS does not know until the test creates its Service.
const missingName = "nodeready-e2e.default.svc.cluster.local"

// TestRealNode runs nodeready as users do: `kubectl apply -f manifests/` with the shipped
// ConfigMap (only the image reference and pull policy changed), on a real kubelet with
// containerd and runc, a bridge network, kube-proxy and CoreDNS. The scenarios run in order on
// the one node; the last installs the release that `make release` builds (release_test.go).
func TestRealNode(t *testing.T) {
	c := framework.New(t, framework.Options{RealNodes: &framework.RealNodes{}}).Real()
	pods := watchAgentPods(t, c)
	client := c.CP.Client()

	// A new cluster: nodeready installed, then the first node joins, tainted. CoreDNS cannot
	// schedule anywhere, so the agent releases the node without its dns check (README:
	// Bootstrap) and CoreDNS starts on it.
	t.Run("a new node is verified and its agent exits 0", func(t *testing.T) {
		require.NoError(t, c.Install(t.Context()))
		since := time.Now()
		rec, err := c.Record(t.Context())
		require.NoError(t, err)
		require.NoError(t, c.StartNode(t.Context()))
		pod := pods.newPod(t, nil)
		released(t, c, pods, pod)
		tl, err := rec.Wait(t.Context())
		require.NoError(t, err)
		assert.Equal(t, pod, tl.Pod)
		for _, s := range tl.Steps() {
			t.Logf("%-36s %s", s.Name, s.Took.Round(time.Millisecond))
		}
		t.Logf("node Ready → agent pod gone: %s; agent image %d bytes", tl.Total().Round(time.Millisecond), c.Images.AgentSize)
		cond := framework.AgentCondition(getNode(t, c))
		require.NotNil(t, cond)
		assert.Equal(t, "Verified", cond.Reason)
		assert.Contains(t, nodeEventReasons(t, c, since), "Verified")
		assert.Contains(t, nodeEventReasons(t, c, since), "DNSNotChecked", "bootstrap: no cluster DNS anywhere")
		for _, w := range warnings(t, c, pod, since) {
			assert.Contains(t, []string{"DNSNotChecked", "CgroupV1"}, w.Reason, "Warning Event %s: %s", w.Reason, w.Message)
		}
		poll(t, 2*time.Minute, "CoreDNS ready on the released node", func() bool {
			d, err := client.AppsV1().Deployments("kube-system").Get(t.Context(), "coredns", metav1.GetOptions{})
			return err == nil && d.Status.ReadyReplicas == 1
		})
	})

	// With CoreDNS running, all four default checks pass through the pod network: DNS through
	// kube-proxy to CoreDNS, tcp and apiserver through the kubernetes Service, endpoints on
	// the API server's own EndpointSlice.
	t.Run("re-verification passes every check and leaves no Warning Event", func(t *testing.T) {
		since := time.Now()
		known := pods.pods()
		_, err := c.Kubectl(t.Context(), "label", "node", c.NodeName, wellknown.VerifiedLabel+"-")
		require.NoError(t, err)
		pod := pods.newPod(t, known)
		released(t, c, pods, pod)
		cond := framework.AgentCondition(getNode(t, c))
		require.NotNil(t, cond)
		assert.Equal(t, "All 5 checks passed", cond.Message)
		assert.Empty(t, warnings(t, c, pod, since), "a healthy verification leaves no Warning Event")
	})

	// A node whose DNS cannot resolve the name it must: held, with the condition and Events;
	// its agent killed and restarted by the kubelet, then its pod deleted during the checks;
	// released once the name resolves.
	t.Run("a failing check holds the node until it is fixed", func(t *testing.T) {
		_, err := c.Kubectl(t.Context(), "-n", "kube-system", "patch", "configmap", "nodeready-config", "--type=merge",
			`-p={"data":{"DNS_TEST_DOMAINS":"`+missingName+`"}}`)
		require.NoError(t, err)
		t.Cleanup(func() {
			_, _ = c.Kubectl(context.Background(), "-n", "kube-system", "patch", "configmap", "nodeready-config", "--type=merge",
				`-p={"data":{"DNS_TEST_DOMAINS":"kubernetes.default.svc.cluster.local"}}`)
		})
		since := time.Now()
		known := pods.pods()
		asNewNode(t, c)
		pod := pods.newPod(t, known)

		waitChecksFailed(t, c)
		n := getNode(t, c)
		assert.True(t, tainted(n), "held")
		assert.NotContains(t, n.Labels, wellknown.VerifiedLabel)
		assert.Contains(t, framework.AgentCondition(n).Message, missingName)
		poll(t, time.Minute, "CheckFailed and VerificationFailed Events", func() bool {
			r := nodeEventReasons(t, c, since)
			return slices.Contains(r, "CheckFailed") && slices.Contains(r, "VerificationFailed")
		})
		poll(t, time.Minute, "READY 1/1 while the agent holds the node", func() bool { return pods.wasReady(pod) })

		t.Run("the own-node policy holds with the token the kubelet mounted", func(t *testing.T) {
			ownNodePolicy(t, c, pod)
		})

		t.Run("the container killed is restarted by the kubelet", func(t *testing.T) {
			procs := c.Node.Processes("/nodeready")
			require.Len(t, procs, 1, "one agent process on the node")
			require.NoError(t, syscall.Kill(procs[0], syscall.SIGKILL))
			var cs corev1.ContainerStatus
			poll(t, 2*time.Minute, "the agent restarted", func() bool {
				p, err := client.CoreV1().Pods("kube-system").Get(t.Context(), pod, metav1.GetOptions{})
				if err != nil || len(p.Status.ContainerStatuses) == 0 {
					return false
				}
				cs = p.Status.ContainerStatuses[0]
				return cs.RestartCount >= 1 && cs.State.Running != nil
			})
			require.NotNil(t, cs.LastTerminationState.Terminated)
			assert.Equal(t, int32(137), cs.LastTerminationState.Terminated.ExitCode)
			poll(t, time.Minute, "the restarted agent keeps its timers", func() bool {
				return strings.Contains(agentLog(t, c, pod, 1), "Restarted in the same pod")
			})
			assert.True(t, tainted(getNode(t, c)), "still held")
			// The restarted process counts its rounds on from the pod's (STATE_DIR): its
			// first round records the failure again, and the node never goes back to
			// ChecksFailing as if it had just joined. Once recorded, its rounds write
			// nothing more while the same check fails, so the next test sees only its own doing.
			restarted := cs.State.Running.StartedAt.Time
			poll(t, 2*time.Minute, "the failure recorded again by the restarted agent", func() bool {
				cond := framework.AgentCondition(getNode(t, c))
				require.NotNil(t, cond)
				require.Equal(t, "ChecksFailed", cond.Reason, "the restarted agent counted its rounds anew")
				return slices.Contains(nodeEventReasons(t, c, restarted), "VerificationFailed")
			})
		})

		t.Run("the pod deleted during its checks writes nothing and exits 0", func(t *testing.T) {
			before := getNode(t, c)
			known := pods.pods()
			require.NoError(t, client.CoreV1().Pods("kube-system").Delete(t.Context(), pod, metav1.DeleteOptions{}))
			poll(t, time.Minute, "the pod gone", func() bool { return pods.isGone(pod) })
			cs, ok := pods.lastContainerStatus(pod)
			require.True(t, ok, "the kubelet reported the container's end")
			assert.Equal(t, int32(0), cs.State.Terminated.ExitCode)
			after := getNode(t, c)
			assert.Equal(t, before.Labels, after.Labels)
			assert.Equal(t, before.Annotations, after.Annotations)
			assert.Equal(t, before.Spec.Taints, after.Spec.Taints)
			assert.Equal(t, framework.AgentCondition(before), framework.AgentCondition(after))
			pod = pods.newPod(t, known) // the DaemonSet's next agent on the still unverified node
		})

		// The fix: the name exists. The agent checks again at RETRY_BACKOFF_MAX.
		_, err = client.CoreV1().Services("default").Create(t.Context(), &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "nodeready-e2e"},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		released(t, c, pods, pod)
		assert.Equal(t, "Verified", framework.AgentCondition(getNode(t, c)).Reason)
	})

	// A GPU node as DRA drivers bring one up: the dra gate holds the node until a real kubelet
	// plugin (e2e/cmd/draplugin, on k8s.io/dynamic-resource-allocation's kubeletplugin helper),
	// registered with this kubelet, has published its devices. The plugin publishes only once
	// the kubelet has answered its registration, so its slices are proof of both.
	t.Run("the dra gate holds the node until a kubelet plugin publishes its devices", func(t *testing.T) {
		const driver = "gpu.nodeready.example"
		plugin := buildDRAPlugin(t)
		_, err := c.Kubectl(t.Context(), "apply", "-f", filepath.Join(framework.RepoRoot(t), "manifests", "gates", "dra.yaml"))
		require.NoError(t, err)
		setConfig(t, c, map[string]string{"CHECKS": "dns,tcp,apiserver,endpoints,dra", "DRA_DEVICES": driver + ">=2", "MAX_RETRIES": "2"})
		known := pods.pods()
		asNewNode(t, c)
		pod := pods.newPod(t, known)

		waitChecksFailed(t, c)
		assert.Contains(t, framework.AgentCondition(getNode(t, c)).Message, "dra driver "+driver+": no ResourceSlice for node "+c.NodeName)
		assert.True(t, tainted(getNode(t, c)), "held")

		require.NoError(t, c.Node.StartPlugin("draplugin", plugin, "-driver="+driver, "-devices=2", "-delay=1s"))
		released(t, c, pods, pod)
		assert.Equal(t, "Verified", framework.AgentCondition(getNode(t, c)).Reason)

		list, err := client.ResourceV1().ResourceSlices().List(t.Context(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + c.NodeName})
		require.NoError(t, err)
		require.Len(t, list.Items, 1, "the plugin's slice")
		s := list.Items[0]
		assert.Equal(t, driver, s.Spec.Driver)
		assert.Len(t, s.Spec.Devices, 2)
		require.Len(t, s.OwnerReferences, 1)
		assert.Equal(t, "Node", s.OwnerReferences[0].Kind, "the helper publishes slices owned by the node")
	})

	// The release, last: it replaces the install above with the release's own artefacts.
	t.Run("the release installs as the install guide says", func(t *testing.T) {
		testRelease(t, c, pods)
	})
}

// waitChecksFailed waits until the agent has recorded a failure on the node.
func waitChecksFailed(t *testing.T, c *realnode.Cluster) {
	t.Helper()
	poll(t, 3*time.Minute, "condition ChecksFailed", func() bool {
		cond := framework.AgentCondition(getNode(t, c))
		return cond != nil && cond.Reason == "ChecksFailed"
	})
}

// asNewNode makes the node look new to nodeready: the startup taint, no verified label.
func asNewNode(t *testing.T, c *realnode.Cluster) {
	t.Helper()
	_, err := c.Kubectl(t.Context(), "taint", "node", c.NodeName, wellknown.StartupTaintString)
	require.NoError(t, err)
	_, err = c.Kubectl(t.Context(), "label", "node", c.NodeName, wellknown.VerifiedLabel+"-")
	require.NoError(t, err)
}

// buildDRAPlugin builds e2e/cmd/draplugin into the test's temporary directory.
func buildDRAPlugin(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "draplugin")
	out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "../../cmd/draplugin").CombinedOutput()
	require.NoError(t, err, "go build ./cmd/draplugin: %s", out)
	return bin
}

// setConfig sets settings in nodeready-config and puts their values back when the test ends.
func setConfig(t *testing.T, c *realnode.Cluster, settings map[string]string) {
	t.Helper()
	cm, err := c.CP.Client().CoreV1().ConfigMaps("kube-system").Get(t.Context(), "nodeready-config", metav1.GetOptions{})
	require.NoError(t, err)
	before := map[string]string{}
	for k := range settings {
		before[k] = cm.Data[k]
	}
	patch := func(ctx context.Context, data map[string]string) error {
		b, err := json.Marshal(map[string]any{"data": data})
		if err != nil {
			return err
		}
		_, err = c.CP.Client().CoreV1().ConfigMaps("kube-system").Patch(ctx, "nodeready-config", types.MergePatchType, b, metav1.PatchOptions{})
		return err
	}
	require.NoError(t, patch(t.Context(), settings))
	t.Cleanup(func() {
		if err := patch(context.Background(), before); err != nil {
			t.Errorf("put nodeready-config back: %v", err)
		}
	})
}

// released waits for the node to be released and the agent pod to go, and checks what the
// kubelet reported: the agent exited 0 and was never restarted. Not that the pod was Ready:
// an agent whose checks pass at once (35-60 ms on a re-verification) ends before the kubelet's
// first status report of its pod; a held node's agent shows READY 1/1 ("a failing check holds
// the node until it is fixed").
func released(t *testing.T, c *realnode.Cluster, pods *podLog, pod string) {
	t.Helper()
	poll(t, 4*time.Minute, "node released", func() bool {
		n := getNode(t, c)
		return n.Labels[wellknown.VerifiedLabel] == "true" && !tainted(n)
	})
	poll(t, 2*time.Minute, "agent pod "+pod+" gone", func() bool { return pods.isGone(pod) })
	cs, ok := pods.lastContainerStatus(pod)
	require.True(t, ok, "the kubelet reported the container's end")
	assert.Equal(t, int32(0), cs.State.Terminated.ExitCode, "exit code of %s", pod)
	assert.Zero(t, cs.RestartCount, "restarts of %s", pod)
}

// agentLog reads the agent container's log that the kubelet wrote for a restart.
func agentLog(t *testing.T, c *realnode.Cluster, pod string, restart int) string {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(c.Node.PodLogsDir(), "kube-system_"+pod+"_*", "nodeready"))
	if len(dirs) != 1 {
		return ""
	}
	data, _ := os.ReadFile(filepath.Join(dirs[0], strconv.Itoa(restart)+".log"))
	return string(data)
}

// ownNodePolicy uses the agent pod's token, as the kubelet mounted it, against another node
// and its own: the admission policy refuses the first.
func ownNodePolicy(t *testing.T, c *realnode.Cluster, pod string) {
	p, err := c.CP.Client().CoreV1().Pods("kube-system").Get(t.Context(), pod, metav1.GetOptions{})
	require.NoError(t, err)
	// The token is in a tmpfs the kubelet mounted in the node's mount namespace: the pod's
	// projected volume with the ServiceAccount token in it (api-token, as the DaemonSet names it).
	var volume, file string
	for _, v := range p.Spec.Volumes {
		for _, src := range ptr.Deref(v.Projected, corev1.ProjectedVolumeSource{}).Sources {
			if src.ServiceAccountToken != nil {
				volume, file = v.Name, src.ServiceAccountToken.Path
			}
		}
	}
	require.NotEmpty(t, volume, "the agent pod has a projected ServiceAccount token")
	token, err := c.Node.ReadFile(filepath.Join(c.Node.KubeletRoot(), "pods", string(p.UID), "volumes", "kubernetes.io~projected", volume, file))
	require.NoError(t, err)
	require.NotEmpty(t, token)

	cfg := c.CP.RESTConfig()
	cfg = &rest.Config{Host: cfg.Host, BearerToken: string(token), TLSClientConfig: rest.TLSClientConfig{CAFile: c.CP.CAFile()}}
	agent, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)

	// Labelled verified, so the DaemonSet runs no agent there.
	other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "other-node", Labels: map[string]string{wellknown.VerifiedLabel: "true"}}}
	_, err = c.CP.Client().CoreV1().Nodes().Create(t.Context(), other, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = c.CP.Client().CoreV1().Nodes().Delete(context.Background(), "other-node", metav1.DeleteOptions{})
	})
	patch := []byte(`{"metadata":{"labels":{"example.com/touched":"true"}}}`)
	_, err = agent.CoreV1().Nodes().Patch(t.Context(), "other-node", types.MergePatchType, patch, metav1.PatchOptions{})
	require.Error(t, err)
	assert.True(t, apierrors.IsForbidden(err) || apierrors.IsInvalid(err), "refused: %v", err)
	assert.Contains(t, err.Error(), "nodeready")
}
