package failure

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// TestClusterFaultsNeverReplace: with replace-node installed and after the retries, a node
// whose checks fail for the cluster's or the configuration's fault is held, never
// replaced: the dra gate on an API server that serves no resource.k8s.io (the oldest
// supported release, where DRA is off unless turned on; a newer API server with the group
// turned off never gets ready, its own informers waiting for it), and the
// daemonsets gate naming a DaemonSet that does not exist. Each node says Misconfigured and
// why in its condition, its VerificationFailed Event says no failure action applies, its
// agent's nodeready_misconfigured (the series NodeReadyMisconfigured reads) is 1, and its
// NodeClaim and Node are still there.
func TestClusterFaultsNeverReplace(t *testing.T) {
	fw := framework.New(t, framework.Options{Kubernetes: framework.OldestKubernetes})
	ctx := t.Context()
	for _, dir := range []string{"replace-node", "gates"} {
		out, err := fw.KubectlContext(ctx, "apply", "-f", filepath.Join(fw.RepoRoot(), "manifests", dir))
		require.NoError(t, err, "kubectl apply -f manifests/%s/: %s", dir, out)
	}
	claims := installNodeClaims(t, fw)

	// The fault is real: discovery lists no resource.k8s.io.
	groups, err := fw.Client().Discovery().ServerGroups()
	require.NoError(t, err)
	for _, g := range groups.Groups {
		require.NotEqual(t, "resource.k8s.io", g.Name, "the API server serves resource.k8s.io")
	}
	_, err = fw.Client().AppsV1().DaemonSets("kube-system").Get(ctx, "cilium", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "kube-system/cilium exists: %v", err)

	for _, tt := range []struct {
		name string
		env  map[string]string
		says string
	}{
		{"dra", map[string]string{"CHECKS": "dra", "DRA_DEVICES": "gpu.example.com>=1"}, "serves no resource.k8s.io"},
		{"daemonsets", map[string]string{"CHECKS": "daemonsets", "DAEMONSETS": "kube-system/cilium"}, "daemonset kube-system/cilium: not found"},
	} {
		fw.Run(tt.name, func(t *testing.T, fw *framework.Framework) {
			f := fw.NewFleet("fault-" + tt.name)
			node := f.Name() + "-0"
			claim := createNodeClaim(t, claims, "default-fault-"+tt.name, node)
			env := replaceEnv("1")
			for k, v := range tt.env {
				env[k] = v
			}
			require.NoError(t, f.AddNode(ctx, node, framework.NodeOptions{Labels: karpenterLabels, Env: env}))
			registerNode(t, fw, node, claim)
			agent, err := f.WaitAgentRunning(ctx, node)
			require.NoError(t, err)
			require.NoError(t, f.WaitMetric(ctx, agent, "nodeready_verification_failures_total", 1))
			require.NoError(t, f.WaitMetric(ctx, agent, "nodeready_rounds_total", 4), "rounds go on after the failure")
			require.NoError(t, f.WaitMetric(ctx, agent, "nodeready_misconfigured", 1), "the series NodeReadyMisconfigured reads")

			cond := fw.WaitCondition(node, string(wellknown.Misconfigured))
			assert.Contains(t, cond.Message, tt.says)
			assert.Contains(t, fw.WaitEvent(node, string(wellknown.VerificationFailed)).Note, "failure action: none while the installation is misconfigured")
			fw.RequireHeld(node)
			_, err = claims.Get(ctx, claim.GetName(), metav1.GetOptions{})
			assert.NoError(t, err, "the NodeClaim was deleted")
			fw.Node(node) // still there
			fw.RequireNoEvent(node, string(wellknown.ReplacingNode))
		})
	}
}
