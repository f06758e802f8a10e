package install

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/chart"
	"github.com/nodeready/nodeready/e2e/framework/harness"
	"github.com/nodeready/nodeready/e2e/framework/kubelet"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// heldEnv makes a node's agents fail the tcp check for as long as the node lives: nothing
// listens on port 1 of loopback. Its node stays held, its agent running.
var heldEnv = map[string]string{"TCP_TARGETS": "127.0.0.1:1"}

// TestHelmLifecycle takes one release of the chart through what a platform team does after
// the install, on the real control plane, with nodes held throughout:
//
//   - helm test passes on a working install and fails once the agent's RBAC is broken;
//   - helm upgrade refuses to drop the startup taint a held node carries, and to change the
//     verified label while verified nodes lack the new one; once they carry it, the upgrade
//     goes through and starts no agent on them;
//   - helm upgrade with a setting changed rolls the agent of a held node onto it: a new pod,
//     which releases the node under the new setting;
//   - helm uninstall, with a node held and the creation-time policy installed, leaves no node
//     with the startup taint, no object of the release and no hook behind, and a node created
//     afterwards gets no startup taint; with uninstall.removeNodeMarks, no node keeps the
//     verified label, the completion annotations or the condition.
//
// The uninstall hook runs `nodeready uninstall --release-held` in the agent image.
func TestHelmLifecycle(t *testing.T) {
	fw := framework.New(t, framework.Options{Cluster: framework.ClusterOptions{NoManifests: true}})
	c := fw.Cluster()
	ctx := t.Context()
	cluster := []string{"--kubeconfig", c.ControlPlane().Kubeconfig(), "--namespace", harness.Namespace}
	// The pod values too: the API server takes them, and the agents they make release nodes.
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	values := append(chart.SetFlags(t, harness.LoopbackConfig()),
		"--set", "startupTaintPolicy.enabled=true", "--set", "uninstall.waitForAgents=3s", "--set", "uninstall.removeNodeMarks=true",
		"--set", "image.digest="+digest, "--set", "podLabels.team=infra", "--set", "podAnnotations.example\\.com/owner=infra",
		"--set-json", `tolerations=[{"key":"dedicated","operator":"Exists"}]`,
		"--set-json", `extraEnv=[{"name":"GODEBUG","value":"madvdontneed=1"}]`)
	helm := func(args ...string) (string, error) {
		t.Helper()
		return chart.RunHelm(t, append(args, cluster...)...)
	}

	_, err := helm(append([]string{"install", chart.Release, chart.Dir(t), "--wait", "--timeout", "2m"}, values...)...)
	require.NoError(t, err)
	f := harness.NewFleetForTest(t, c, "life")
	released, err := f.AddNodes(ctx, 1, harness.NodeOptions{})
	require.NoError(t, err)
	require.NoError(t, f.WaitReleased(ctx, released...))
	require.NoError(t, f.WaitAgentsGone(ctx, released...))
	ds, err := c.Client().AppsV1().DaemonSets(harness.Namespace).Get(ctx, harness.DaemonSetName, metav1.GetOptions{})
	require.NoError(t, err)
	tmpl := ds.Spec.Template
	assert.Equal(t, "ghcr.io/nodeready/nodeready@"+digest, tmpl.Spec.Containers[0].Image)
	assert.Equal(t, "infra", tmpl.Labels["team"])
	assert.Equal(t, "infra", tmpl.Annotations["example.com/owner"])
	assert.Regexp(t, "^[0-9a-f]{64}$", tmpl.Annotations["checksum/config"])
	assert.Contains(t, tmpl.Spec.Containers[0].Env, corev1.EnvVar{Name: "GODEBUG", Value: "madvdontneed=1"})

	t.Run("helm test passes on a working install", func(t *testing.T) {
		out, err := helm("test", chart.Release, "--timeout", "2m")
		require.NoError(t, err, out)
		assert.Contains(t, out, "nodeready-test")
	})

	t.Run("helm test fails when the agent cannot read what its endpoints check reads", func(t *testing.T) {
		bindings := c.Client().RbacV1().RoleBindings(metav1.NamespaceDefault)
		rb, err := bindings.Get(ctx, "nodeready-endpoints", metav1.GetOptions{})
		require.NoError(t, err)
		require.NoError(t, bindings.Delete(ctx, rb.Name, metav1.DeleteOptions{}))
		out, err := helm("test", chart.Release, "--timeout", "2m")
		require.Error(t, err, out)
		assert.Contains(t, err.Error(), "nodeready-test")

		rb.ResourceVersion, rb.UID = "", ""
		_, err = bindings.Create(ctx, rb, metav1.CreateOptions{})
		require.NoError(t, err)
		out, err = helm("test", chart.Release, "--timeout", "2m")
		require.NoError(t, err, "once the RoleBinding is back: %s", out)
	})

	held, err := f.AddNodes(ctx, 1, harness.NodeOptions{Env: heldEnv})
	require.NoError(t, err)
	_, err = c.WaitAgentCondition(ctx, held[0], string(wellknown.ChecksFailed))
	require.NoError(t, err)

	t.Run("helm upgrade refuses to drop the startup taint a held node carries", func(t *testing.T) {
		out, err := helm(append([]string{"upgrade", chart.Release, chart.Dir(t)}, append(values, "--set", "config.taintKey=example.com/unverified")...)...)
		require.Error(t, err, out)
		assert.Contains(t, err.Error(), "config.taintKey")
		assert.Contains(t, err.Error(), held[0])
		assertRevision(t, helm, 1)
	})

	t.Run("helm upgrade with a setting changed rolls the held node's agent onto it", func(t *testing.T) {
		before, err := f.AgentPods(ctx, held[0])
		require.NoError(t, err)
		require.Len(t, before, 1)
		// Without the tcp check, the held node's agent passes: only an agent that read the
		// new configuration releases it.
		_, err = helm(append([]string{"upgrade", chart.Release, chart.Dir(t)}, append(values, "--set", "config.checks={dns,apiserver,endpoints}")...)...)
		require.NoError(t, err)
		require.NoError(t, f.WaitReleased(ctx, held[0]))
		require.NoError(t, f.WaitAgentsGone(ctx, held[0]))
		assert.True(t, slices.ContainsFunc(f.PodsOn(held[0]), func(p kubelet.PodInfo) bool { return p.UID != before[0].UID }),
			"the node was released by a new agent pod, not by %s", before[0].Name)
		values = append(values, "--set", "config.checks={dns,apiserver,endpoints}")
	})

	t.Run("helm upgrade refuses a new verified label until the verified nodes carry it", func(t *testing.T) {
		const label = "example.com/verified"
		newLabel := append(slices.Clone(values), "--set", "config.verifiedLabel="+label)
		out, err := helm(append([]string{"upgrade", chart.Release, chart.Dir(t)}, newLabel...)...)
		require.Error(t, err, out)
		assert.Contains(t, err.Error(), "config.verifiedLabel")
		for _, n := range append(released, held...) {
			assert.Contains(t, err.Error(), n)
		}

		out, err = c.Kubectl(ctx, "label", "nodes", "-l", wellknown.VerifiedLabel+"=true", label+"=true")
		require.NoError(t, err, out)
		_, err = helm(append([]string{"upgrade", chart.Release, chart.Dir(t)}, newLabel...)...)
		require.NoError(t, err)
		// No agent comes to the verified nodes: the DaemonSet schedules none.
		time.Sleep(3 * time.Second)
		ds, err := c.Client().AppsV1().DaemonSets(harness.Namespace).Get(ctx, harness.DaemonSetName, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Zero(t, ds.Status.DesiredNumberScheduled, "agents scheduled on verified nodes")
		for _, n := range append(released, held...) {
			pods, err := f.AgentPods(ctx, n)
			require.NoError(t, err)
			assert.Empty(t, pods, n)
		}
		values = newLabel
	})

	t.Run("helm uninstall releases the held nodes and strands none", func(t *testing.T) {
		// The tcp check is off since the upgrade above: its DNS holds this node.
		stuck, err := f.AddNodes(ctx, 1, harness.NodeOptions{BrokenDNS: true})
		require.NoError(t, err)
		_, err = c.WaitAgentCondition(ctx, stuck[0], string(wellknown.ChecksFailed))
		require.NoError(t, err)

		manifest, err := helm("get", "manifest", chart.Release)
		require.NoError(t, err)
		installed := chart.ParseObjects(t, "helm get manifest", []byte(manifest))
		out, err := helm("uninstall", chart.Release, "--wait", "--timeout", "4m")
		require.NoError(t, err, out)

		waitNoHeldNode(t, c)
		n := fw.Node(stuck[0])
		assert.NotContains(t, n.Labels, "example.com/verified", "a node released at uninstall was not verified")
		fw.WaitEvent(stuck[0], "ReleasedAtUninstall")
		for _, name := range append(released, held...) {
			n := fw.Node(name)
			assert.NotContains(t, n.Labels, "example.com/verified", name)
			assert.NotContains(t, n.Annotations, "example.com/verified-at", name)
			assert.NotContains(t, n.Annotations, "example.com/verified-duration", name)
			assert.Nil(t, harness.AgentCondition(n), "%s keeps the condition", name)
		}
		assertGone(t, c, installed)
		for _, o := range []string{"serviceaccount/nodeready-uninstall", "job/nodeready-uninstall", "pod/nodeready-test"} {
			out, err := c.Kubectl(ctx, "get", o, "-n", harness.Namespace, "--ignore-not-found", "-o", "name")
			require.NoError(t, err)
			assert.Empty(t, strings.TrimSpace(out), "%s is left after helm uninstall", o)
		}
		assertNoStartupTaintOnNewNode(t, fw)
	})
}

// assertRevision holds the release at revision: a refused upgrade records nothing.
func assertRevision(t *testing.T, helm func(...string) (string, error), revision int) {
	t.Helper()
	out, err := helm("history", chart.Release, "--max", "1", "-o", "json")
	require.NoError(t, err)
	assert.Contains(t, out, `"revision":`+strconv.Itoa(revision), "history: %s", out)
}

// assertGone holds every object of installed to be gone from the cluster.
func assertGone(t *testing.T, c *harness.Cluster, installed map[string]chart.Object) {
	t.Helper()
	for key, o := range installed {
		meta := o["metadata"].(map[string]any)
		args := []string{"get", strings.ToLower(o["kind"].(string)), meta["name"].(string), "--ignore-not-found", "-o", "name"}
		if ns, ok := meta["namespace"].(string); ok {
			args = append(args, "--namespace", ns)
		}
		out, err := c.Kubectl(t.Context(), args...)
		require.NoError(t, err)
		assert.Empty(t, strings.TrimSpace(out), "%s is still there after the uninstall", key)
	}
}

// assertNoStartupTaintOnNewNode creates a node as a kubelet registers one and holds it free
// of the startup taint: nothing of nodeready's taints new nodes after the uninstall.
func assertNoStartupTaintOnNewNode(t *testing.T, fw *framework.Framework) {
	c := fw.Cluster()
	t.Helper()
	ctx := t.Context()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "after-uninstall", Labels: map[string]string{"kubernetes.io/os": "linux"}}}
	_, err := c.Client().CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		err := c.Client().CoreV1().Nodes().Delete(context.WithoutCancel(ctx), node.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Logf("delete node %s: %v", node.Name, err)
		}
	})
	n := fw.Node(node.Name)
	assert.False(t, harness.IsTainted(n), "a node created after the uninstall got the startup taint: %v", n.Spec.Taints)
}

// waitNoHeldNode waits until no node carries the startup taint.
func waitNoHeldNode(t *testing.T, c *harness.Cluster) {
	t.Helper()
	var last []string
	err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		nodes, err := c.Client().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		last = last[:0]
		for i := range nodes.Items {
			if harness.IsTainted(&nodes.Items[i]) {
				last = append(last, nodes.Items[i].Name)
			}
		}
		return len(last) == 0, nil
	})
	require.NoError(t, err, "nodes still carrying the startup taint: %v", last)
}

// TestManifestsUninstall runs the uninstall that docs/install.md gives for `kubectl apply -f
// manifests/`, with a node held and the creation-time policy installed: no node is left with
// the startup taint, the held node is released without the verified label, the verified node
// keeps its label (no --remove-marks), nodeready's objects are gone, and a node created
// afterwards gets no startup taint.
func TestManifestsUninstall(t *testing.T) {
	fw := framework.New(t, framework.Options{})
	c := fw.Cluster()
	ctx := t.Context()
	repo := c.RepoRoot()
	out, err := c.Kubectl(ctx, "apply", "-f", repo+"/manifests/node-creation/startup-taint.yaml")
	require.NoError(t, err, out)

	f := harness.NewFleetForTest(t, c, "plain")
	released, err := f.AddNodes(ctx, 1, harness.NodeOptions{})
	require.NoError(t, err)
	held, err := f.AddNodes(ctx, 1, harness.NodeOptions{Env: heldEnv})
	require.NoError(t, err)
	require.NoError(t, f.WaitReleased(ctx, released...))
	_, err = c.WaitAgentCondition(ctx, held[0], string(wellknown.ChecksFailed))
	require.NoError(t, err)

	// The command of docs/install.md, "Uninstall", with the optional part installed here.
	out, err = c.Kubectl(ctx, "apply", "-f", repo+"/manifests/uninstall/")
	require.NoError(t, err, out)
	// kubectl wait --for=condition=Complete, as the harness's kubectl may not wait the Job's
	// --wait-for-agents=60s out: the held node's agent never releases it.
	err = wait.PollUntilContextTimeout(ctx, time.Second, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		job, err := c.Client().BatchV1().Jobs(harness.Namespace).Get(ctx, "nodeready-uninstall", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range job.Status.Conditions {
			if cond.Type == batchv1.JobComplete && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
			if cond.Type == batchv1.JobFailed && cond.Status == corev1.ConditionTrue {
				return false, fmt.Errorf("job nodeready-uninstall failed: %s", cond.Message)
			}
		}
		return false, nil
	})
	require.NoError(t, err)
	out, err = c.Kubectl(ctx, "delete", "--ignore-not-found", "-f", repo+"/manifests/uninstall/", "-f", repo+"/manifests/",
		"-f", repo+"/manifests/node-creation/startup-taint.yaml")
	require.NoError(t, err, out)

	waitNoHeldNode(t, c)
	n := fw.Node(held[0])
	assert.NotContains(t, n.Labels, wellknown.VerifiedLabel, "a node released at uninstall was not verified")
	fw.WaitEvent(held[0], "ReleasedAtUninstall")
	assert.Equal(t, "true", fw.Node(released[0]).Labels[wellknown.VerifiedLabel])
	for _, o := range []string{"daemonset/nodeready", "configmap/nodeready-config", "serviceaccount/nodeready", "serviceaccount/nodeready-uninstall"} {
		out, err := c.Kubectl(ctx, "get", o, "-n", harness.Namespace, "--ignore-not-found", "-o", "name")
		require.NoError(t, err)
		assert.Empty(t, strings.TrimSpace(out), "%s is left after the uninstall", o)
	}
	assertNoStartupTaintOnNewNode(t, fw)
}

// TestConfigMapEditNeedsRestart: installed with kubectl, an edit of nodeready-config does not
// reach a running agent, which read its configuration at start; `kubectl rollout restart
// ds/nodeready`, as docs/install.md says, gives the held node an agent that reads it.
func TestConfigMapEditNeedsRestart(t *testing.T) {
	fw := framework.New(t, framework.Options{})
	c := fw.Cluster()
	ctx := t.Context()
	f := harness.NewFleetForTest(t, c, "edit")
	held, err := f.AddNodes(ctx, 1, harness.NodeOptions{BrokenDNS: true})
	require.NoError(t, err)
	_, err = c.WaitAgentCondition(ctx, held[0], string(wellknown.ChecksFailed))
	require.NoError(t, err)

	// Without the dns check the node would pass.
	require.NoError(t, c.ApplyConfig(ctx, map[string]string{"CHECKS": "tcp,apiserver,endpoints"}))
	time.Sleep(5 * time.Second) // several rounds at RETRY_BACKOFF_MAX=1s
	assert.True(t, harness.IsTainted(fw.Node(held[0])), "the running agent read the edited ConfigMap")

	out, err := c.Kubectl(ctx, "-n", harness.Namespace, "rollout", "restart", "ds/"+harness.DaemonSetName)
	require.NoError(t, err, out)
	require.NoError(t, f.WaitReleased(ctx, held[0]))
}
