package install

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/chart"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// TestHelmInstall installs the chart with `helm install` onto the real control plane, as
// the README's command does, with the harness's loopback settings as values: a bad value
// fails the install and installs nothing; a new tainted node is verified and released by
// the agent the chart installed, under the own-node policy the chart installed; `helm
// uninstall` removes every object the release made. Installed again with nameOverride, every
// object is renamed, a new node is released by the renamed agent, and `helm uninstall` removes
// the renamed objects.
func TestHelmInstall(t *testing.T) {
	fw := framework.New(t, framework.Options{Cluster: framework.ClusterOptions{NoManifests: true}})
	ctx := t.Context()
	cluster := []string{"--kubeconfig", fw.ControlPlane().Kubeconfig(), "--namespace", framework.Namespace}

	// A bad value: refused before anything reaches the cluster.
	_, err := chart.RunHelm(t, append([]string{"install", chart.Release, chart.Dir(t), "--set", "config.taintEffect=Sometimes"}, cluster...)...)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "/config/taintEffect")
	releases, err := chart.RunHelm(t, append([]string{"list", "--short", "--deployed", "--failed", "--pending"}, cluster...)...)
	require.NoError(t, err)
	assert.Empty(t, strings.TrimSpace(releases), "a release was recorded")
	_, err = fw.Client().AppsV1().DaemonSets(framework.Namespace).Get(ctx, framework.DaemonSetName, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "DaemonSet after a refused install: %v", err)

	// The install, with the settings the harness gives manifests/ on loopback.
	args := append([]string{"install", chart.Release, chart.Dir(t)}, cluster...)
	out, err := chart.RunHelm(t, append(args, chart.SetFlags(t, framework.LoopbackConfig())...)...)
	require.NoError(t, err)
	t.Logf("helm install:\n%s", out)
	ds, err := fw.Client().AppsV1().DaemonSets(framework.Namespace).Get(ctx, framework.DaemonSetName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "Helm", ds.Labels["app.kubernetes.io/managed-by"])

	// A new node with the startup taint: the chart's agent verifies and releases it, and the
	// DaemonSet controller deletes the agent pod.
	f := fw.NewFleet("helm")
	nodes, err := f.AddNodes(ctx, 1, framework.NodeOptions{})
	require.NoError(t, err)
	require.NoError(t, f.WaitReleased(ctx, nodes...))
	fw.WaitCondition(nodes[0], string(wellknown.Verified))
	require.NoError(t, f.WaitAgentsGone(ctx, nodes...))

	// The own-node policy the chart installed is in force: the agent's identity, with a
	// pod-bound token of another node, may not write this one.
	out, err = fw.KubectlContext(ctx, "label", "node", nodes[0], "example.com/probe=1",
		"--as=system:serviceaccount:"+framework.Namespace+":nodeready",
		"--as-user-extra=authentication.kubernetes.io/node-name=another-node")
	require.Error(t, err, out)
	assert.Contains(t, out, "nodeready-own-node")
	assert.Contains(t, out, "may change only its own node")

	// helm uninstall removes everything the release installed.
	uninstall := func() {
		t.Helper()
		manifest, err := chart.RunHelm(t, append([]string{"get", "manifest", chart.Release}, cluster...)...)
		require.NoError(t, err)
		installed := chart.ParseObjects(t, "helm get manifest", []byte(manifest))
		assert.Len(t, installed, len(chart.ManifestObjects(t, "*.yaml")), "the release holds the objects of manifests/")
		out, err := chart.RunHelm(t, append([]string{"uninstall", chart.Release, "--wait", "--timeout", "2m"}, cluster...)...)
		require.NoError(t, err)
		t.Logf("helm uninstall:\n%s", out)
		for key, o := range installed {
			meta := o["metadata"].(map[string]any)
			args := []string{"get", strings.ToLower(o["kind"].(string)), meta["name"].(string), "--ignore-not-found", "-o", "name"}
			if ns, ok := meta["namespace"].(string); ok {
				args = append(args, "--namespace", ns)
			}
			out, err := fw.KubectlContext(ctx, args...)
			require.NoError(t, err)
			assert.Empty(t, strings.TrimSpace(out), "%s is still there after helm uninstall", key)
		}
	}
	uninstall()

	// Installed again with nameOverride: the objects carry the name, and a new node is
	// released by the renamed DaemonSet's agent, which runs as the renamed ServiceAccount
	// under the renamed own-node policy; helm uninstall's hook finds the renamed DaemonSet.
	const renamed = "edge"
	out, err = chart.RunHelm(t, append(append(args, "--set", "nameOverride="+renamed), chart.SetFlags(t, framework.LoopbackConfig())...)...)
	require.NoError(t, err)
	t.Logf("helm install with nameOverride:\n%s", out)
	ds, err = fw.Client().AppsV1().DaemonSets(framework.Namespace).Get(ctx, renamed, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"app.kubernetes.io/name": renamed}, ds.Spec.Selector.MatchLabels)
	assert.Equal(t, renamed, ds.Spec.Template.Spec.ServiceAccountName)
	assert.Equal(t, renamed, ds.Spec.Template.Spec.PriorityClassName)
	assert.Equal(t, renamed+"-config", ds.Spec.Template.Spec.Containers[0].EnvFrom[0].ConfigMapRef.Name)
	_, err = fw.Client().AppsV1().DaemonSets(framework.Namespace).Get(ctx, framework.DaemonSetName, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "DaemonSet %s: %v", framework.DaemonSetName, err)

	nodes, err = f.AddNodes(ctx, 1, framework.NodeOptions{})
	require.NoError(t, err)
	require.NoError(t, f.WaitReleased(ctx, nodes...))
	fw.WaitCondition(nodes[0], string(wellknown.Verified))
	require.NoError(t, f.WaitAgentsGone(ctx, nodes...))
	var agents []string
	for _, p := range f.PodsOn(nodes[0]) {
		agents = append(agents, p.Name)
		assert.True(t, strings.HasPrefix(p.Name, renamed+"-"), "pod %s on the node is not the renamed DaemonSet's", p.Name)
	}
	require.NotEmpty(t, agents, "no agent ran on %s", nodes[0])

	out, err = fw.KubectlContext(ctx, "label", "node", nodes[0], "example.com/probe=1",
		"--as=system:serviceaccount:"+framework.Namespace+":"+renamed,
		"--as-user-extra=authentication.kubernetes.io/node-name=another-node")
	require.Error(t, err, out)
	assert.Contains(t, out, renamed+"-own-node")
	uninstall()
}
