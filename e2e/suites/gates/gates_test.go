package gates

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/kubelet"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// TestGates runs the gates on one control plane with nodeready installed from manifests/.
// Each test has its own fleet and turns its gate on for its own nodes only (NodeOptions.Env
// over the ConfigMap). The pre-pull variant changes the DaemonSet, so it runs last.
func TestGates(t *testing.T) {
	fw := framework.New(t, framework.Options{})

	// The gate's RBAC is not part of manifests/: this subtest applies it, as the README says.
	fw.Run("daemonsets: without its RBAC the failure names the file to apply", testDaemonSetsRBAC)
	fw.Run("daemonsets: held until the required node agent is Ready", testDaemonSets)
	fw.Run("conditions: held until the node reports the condition", testConditions)
	fw.Run("resources: held until the device is allocatable", testResources)
	fw.Run("dra: held until the driver has published complete pools", testDRA)
	fw.Run("pre-pull: warm-up images pulled before the agent starts", testPrepull)
}

// testDaemonSetsRBAC: with `kubectl apply -f manifests/` alone, the daemonsets gate is
// refused and the agent's condition says which file to apply; once it is applied, the same
// agent releases the node.
func testDaemonSetsRBAC(t *testing.T, fw *framework.Framework) {
	const rbacFile = "manifests/gates/daemonsets.yaml"
	ctx := t.Context()
	f, node := fw.NewFleetWithNode("dsrbac", framework.NodeOptions{Env: map[string]string{
		"CHECKS":      baseChecks + ",daemonsets",
		"MAX_RETRIES": "1",
	}})

	var last corev1.NodeCondition
	err := framework.Poll(t, func(ctx context.Context) (bool, error) {
		n, err := fw.Client().CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == wellknown.ConditionType {
				last = cond
				return strings.Contains(cond.Message, "kubectl apply -f "+rbacFile), nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "the agent's condition never named %s; last %+v", rbacFile, last)
	assert.Equal(t, corev1.ConditionFalse, last.Status)
	t.Logf("condition %s: %s", last.Reason, last.Message)
	fw.RequireHeld(node)

	out, err := fw.KubectlContext(ctx, "apply", "-f", filepath.Join(fw.RepoRoot(), rbacFile))
	require.NoError(t, err)
	t.Logf("kubectl apply -f %s:\n%s", rbacFile, out)
	require.NoError(t, f.WaitReleased(ctx, node))
	fw.WaitCondition(node, string(wellknown.Verified))
	require.NoError(t, f.WaitAgentsGone(ctx, node))
}

// testDaemonSets: a fake CNI DaemonSet that tolerates the startup taint, whose pod the
// kubelet makes Ready only after a delay, holds the node until then; a log shipper that does
// not tolerate the taint gets its pod only after the release and is never waited for.
func testDaemonSets(t *testing.T, fw *framework.Framework) {
	const readyAfter = 5 * time.Second
	ctx, client := t.Context(), fw.Client()
	f := fw.NewFleet("ds")
	cni := createDaemonSet(t, client, "fake-cni", f.Name(),
		[]corev1.Toleration{{Operator: corev1.TolerationOpExists}}, // as CNI agents do
		map[string]string{kubelet.ReadyAfterAnnotation: readyAfter.String()})
	shipper := createDaemonSet(t, client, "log-shipper", f.Name(), nil, nil)

	node := f.Name() + "-0"
	require.NoError(t, f.AddNode(ctx, node, framework.NodeOptions{Env: map[string]string{
		"CHECKS":      baseChecks + ",daemonsets",
		"MAX_RETRIES": "3", // the failure, and its Events, are recorded well before the CNI is Ready
	}}))

	// Look every sampleInterval until the release: the node, the pods on it, the node again.
	// A release seen before a not-Ready CNI pod, or a log shipper pod seen before a tainted
	// node, happened in that order.
	var cniReadyAt, releasedAt time.Time
	var samples, heldWhileNotReady int
	var last *corev1.Node
	err := wait.PollUntilContextTimeout(ctx, sampleInterval, framework.WaitTimeout, true, func(ctx context.Context) (bool, error) {
		before, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pods, err := fw.PodsOn(ctx, node)
		if err != nil {
			return false, err
		}
		after, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		now := time.Now()
		samples++
		last = after
		cniPods := podsOf(pods, cni)
		ready := len(cniPods) == 1 && framework.PodReady(&cniPods[0])
		if ready && cniReadyAt.IsZero() {
			cniReadyAt = now
		}
		require.False(t, framework.IsReleased(before) && !ready, "node %s released while fake-cni had no Ready pod: %v", node, framework.PodSummary(cniPods))
		require.False(t, len(podsOf(pods, shipper)) > 0 && !framework.IsReleased(after), "log-shipper got a pod on %s before the release", node)
		if !ready && len(cniPods) == 1 {
			heldWhileNotReady++
		}
		if framework.IsReleased(after) {
			releasedAt = now
			return true, nil
		}
		return false, nil
	})
	require.NoError(t, err, "node %s not released; last seen %+v", node, last)

	var cniPod kubelet.PodInfo
	for _, p := range f.Kubelet().Simulated() {
		if p.Node == node && strings.HasPrefix(p.Name, cni.Name+"-") {
			cniPod = p
		}
	}
	require.False(t, cniPod.Started.IsZero(), "the kubelet never started fake-cni on %s", node)
	t.Logf("fake-cni started %s, seen Ready after %s, node seen released after %s (%d samples, %d with the pod not Ready and the node tainted)",
		cniPod.Started.Format(time.StampMilli), cniReadyAt.Sub(cniPod.Started).Round(time.Millisecond),
		releasedAt.Sub(cniPod.Started).Round(time.Millisecond), samples, heldWhileNotReady)
	assert.GreaterOrEqual(t, releasedAt.Sub(cniPod.Started), readyAfter, "released before fake-cni could be Ready")
	assert.Positive(t, heldWhileNotReady, "no sample saw the node held while fake-cni ran not Ready")
	assert.False(t, cniReadyAt.IsZero(), "fake-cni never seen Ready")

	// The recorded failure names the DaemonSet that held the node, and only that one.
	fw.WaitEvent(node, "CheckFailed")
	failed, err := fw.NodeEvents(node, "CheckFailed")
	require.NoError(t, err)
	for _, e := range failed {
		assert.Contains(t, e.Note, "daemonset kube-system/fake-cni")
		assert.NotContains(t, e.Note, "log-shipper")
	}
	cond := fw.WaitCondition(node, string(wellknown.Verified))
	assert.Equal(t, corev1.ConditionTrue, cond.Status)

	// The log shipper does run on the node, once it is released: it was left out because it
	// does not tolerate the taint, not because it does not belong there.
	err = framework.Poll(t, func(ctx context.Context) (bool, error) {
		pods, err := fw.PodsOn(ctx, node)
		if err != nil {
			return false, nil
		}
		p := podsOf(pods, shipper)
		return len(p) == 1 && framework.PodReady(&p[0]), nil
	})
	require.NoError(t, err, "log-shipper never got a Ready pod on the released node %s", node)
	require.NoError(t, f.WaitAgentsGone(ctx, node))
}

// testConditions: NODE_CONDITIONS=Ready=True,example.com/NetworkReady=True holds the node
// while the condition is missing and while it is False, and releases it once it is True.
func testConditions(t *testing.T, fw *framework.Framework) {
	const network corev1.NodeConditionType = "example.com/NetworkReady"
	ctx := t.Context()
	f, node := fw.NewFleetWithNode("cond", framework.NodeOptions{Env: map[string]string{
		"CHECKS":          baseChecks + ",conditions",
		"NODE_CONDITIONS": "Ready=True," + string(network) + "=True",
		"MAX_RETRIES":     "2",
	}})

	// Missing: the failure is recorded and names the condition, and only that one.
	cond := fw.WaitCondition(node, string(wellknown.ChecksFailed))
	assert.Contains(t, cond.Message, "no condition "+string(network)+", want True")
	assert.NotContains(t, cond.Message, "condition Ready ", "Ready=True is reported by the kubelet")
	fw.RequireHeld(node)

	// False: still held, round after round.
	require.NoError(t, f.Kubelet().SetCondition(ctx, node, network, corev1.ConditionFalse))
	f.WaitMoreRounds(node, 2)
	fw.RequireHeld(node)

	set := time.Now()
	require.NoError(t, f.Kubelet().SetCondition(ctx, node, network, corev1.ConditionTrue))
	require.NoError(t, f.WaitReleased(ctx, node))
	t.Logf("node %s seen released %s after the condition was set", node, time.Since(set).Round(time.Millisecond))

	fw.WaitCondition(node, string(wellknown.Verified))
	n := fw.Node(node)
	for _, want := range []corev1.NodeConditionType{network, corev1.NodeReady} {
		found := false
		for _, got := range n.Status.Conditions {
			if got.Type == want {
				found = true
				assert.Equal(t, corev1.ConditionTrue, got.Status, "condition %s", want)
			}
		}
		assert.True(t, found, "condition %s is gone", want)
	}
	require.NoError(t, f.WaitAgentsGone(ctx, node))
}

// testResources: REQUIRED_RESOURCES=nvidia.com/gpu>=1 holds the node while the resource is
// missing and while none is allocatable, and releases it once the device plugin reports one.
func testResources(t *testing.T, fw *framework.Framework) {
	const gpu corev1.ResourceName = "nvidia.com/gpu"
	ctx := t.Context()
	f, node := fw.NewFleetWithNode("res", framework.NodeOptions{Env: map[string]string{
		"CHECKS":             baseChecks + ",resources",
		"REQUIRED_RESOURCES": string(gpu) + ">=1",
		"MAX_RETRIES":        "2",
	}})

	cond := fw.WaitCondition(node, string(wellknown.ChecksFailed))
	assert.Contains(t, cond.Message, "no allocatable "+string(gpu)+", want at least 1")
	fw.RequireHeld(node)

	require.NoError(t, f.Kubelet().SetAllocatable(ctx, node, gpu, resource.MustParse("0")))
	f.WaitMoreRounds(node, 2)
	fw.RequireHeld(node)

	set := time.Now()
	require.NoError(t, f.Kubelet().SetAllocatable(ctx, node, gpu, resource.MustParse("2")))
	require.NoError(t, f.WaitReleased(ctx, node))
	t.Logf("node %s seen released %s after the device was reported", node, time.Since(set).Round(time.Millisecond))

	fw.WaitCondition(node, string(wellknown.Verified))
	got := fw.Node(node).Status.Allocatable[gpu]
	assert.Equal(t, "2", got.String())
	require.NoError(t, f.WaitAgentsGone(ctx, node))
}

// testPrepull installs the pre-pull variant as the README says, with a second warm-up image
// added as its patch file says, and holds that the kubelet pulled every image and ran every
// init container, the real binary's copy-binary and noop, in order, before the agent
// started, and that the node is verified.
func testPrepull(t *testing.T, fw *framework.Framework) {
	const (
		secondName  = "warm-model-cache"
		secondImage = "example.com/model-cache:v2"
	)
	ctx := t.Context()
	manifests := copyManifests(t, fw.RepoRoot())
	patchFile := filepath.Join(manifests, "variants", "prepull", "daemonset-prepull.yaml")
	addWarmUpImage(t, patchFile, secondName, secondImage)

	// kubectl apply -k kustomize/prepull, the overlay beside the copied manifests/.
	overlays := filepath.Join(filepath.Dir(manifests), "kustomize")
	require.NoError(t, os.CopyFS(overlays, os.DirFS(filepath.Join(fw.RepoRoot(), "kustomize"))))
	applied, err := fw.KubectlContext(ctx, "apply", "-k", filepath.Join(overlays, "prepull"))
	require.NoError(t, err)
	t.Logf("kubectl apply of the pre-pull variant:\n%s", applied)
	t.Cleanup(func() {
		// Back to the plain DaemonSet, for whatever runs after.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := fw.KubectlContext(ctx, "apply", "-f", filepath.Join(fw.RepoRoot(), "manifests", "03-daemonset.yaml")); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	// The variant applies the shipped ConfigMap too: back to the test's settings.
	require.NoError(t, fw.Cluster().ApplyConfig(ctx, nil))

	ds, err := fw.Client().AppsV1().DaemonSets(framework.Namespace).Get(ctx, framework.DaemonSetName, metav1.GetOptions{})
	require.NoError(t, err)
	var initNames, initImages []string
	for _, ic := range ds.Spec.Template.Spec.InitContainers {
		initNames = append(initNames, ic.Name)
		initImages = append(initImages, ic.Image)
	}
	require.Equal(t, []string{"nodeready-bin", "warm-example", secondName}, initNames)
	require.Equal(t, framework.AgentImage, initImages[0], "the copy comes from the agent's image")

	f, node := fw.NewFleetWithNode("prepull", framework.NodeOptions{})
	require.NoError(t, f.WaitReleased(ctx, node))
	require.NoError(t, f.WaitAgentsGone(ctx, node))

	pods := f.PodsOn(node)
	require.Len(t, pods, 1)
	agent := pods[0]
	require.False(t, agent.Started.IsZero())
	require.Len(t, agent.Inits, 3, "init container runs: %+v", agent.Inits)
	prev := time.Time{}
	for i, run := range agent.Inits {
		assert.Equal(t, initNames[i], run.Container, "init containers run in order")
		assert.Equal(t, 0, run.Code, "init container %s", run.Container)
		assert.False(t, run.Simulated, "init container %s ran the real binary", run.Container)
		assert.False(t, run.Started.Before(prev), "init container %s started before the one before it ended", run.Container)
		prev = run.Finished
	}
	assert.False(t, agent.Started.Before(prev), "the agent started before the last init container ended")

	pulls := f.Kubelet().Pulls(node)
	var pulled []string
	for _, p := range pulls {
		pulled = append(pulled, p.Image)
		assert.True(t, p.Init, "%s pulled for an init container", p.Image)
		assert.True(t, p.At.Before(agent.Started), "%s pulled at %s, after the agent started at %s", p.Image, p.At, agent.Started)
	}
	assert.Equal(t, initImages, pulled, "every image pulled once, in order, before the agent")
	assert.Equal(t, pulled, f.Kubelet().Images(node))
	t.Logf("images pulled %v; init containers ran %s; agent started %s after the last pull",
		pulled, prev.Sub(agent.Inits[0].Started).Round(time.Millisecond), agent.Started.Sub(pulls[len(pulls)-1].At).Round(time.Millisecond))
}

// copyManifests copies the repository's manifests/ into a temporary directory, so that an
// operator's edit does not touch the repository, and returns the copy's path.
func copyManifests(t *testing.T, repo string) string {
	t.Helper()
	src := filepath.Join(repo, "manifests")
	dst := filepath.Join(t.TempDir(), "manifests")
	require.NoError(t, os.CopyFS(dst, os.DirFS(src)))
	return dst
}

// addWarmUpImage edits the pre-pull patch as its comment says: a copy of the warm-example
// init container with another name and image.
func addWarmUpImage(t *testing.T, path, name, image string) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var patch map[string]any
	require.NoError(t, yaml.Unmarshal(data, &patch))
	spec := patch["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	inits := spec["initContainers"].([]any)
	var example map[string]any
	for _, ic := range inits {
		if m := ic.(map[string]any); m["name"] == "warm-example" {
			example = m
		}
	}
	require.NotNil(t, example, "%s has no warm-example init container", path)
	second, err := yaml.Marshal(example)
	require.NoError(t, err)
	var copied map[string]any
	require.NoError(t, yaml.Unmarshal(second, &copied))
	copied["name"], copied["image"] = name, image
	spec["initContainers"] = append(inits, copied)
	out, err := yaml.Marshal(patch)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, out, 0o644))
}
