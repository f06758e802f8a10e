package install

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeready/nodeready/checks/dnstest"
	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/controlplane"
	"github.com/nodeready/nodeready/e2e/framework/kubelet"
	"github.com/nodeready/nodeready/e2e/framework/kustomize"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// exampleTaint is the startup taint of kustomize/example/settings.yaml.
var exampleTaint = corev1.Taint{Key: kustomize.NewTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule}

// TestApplyExampleOverlay installs nodeready with `kubectl apply -k kustomize/example` (image
// from another registry, namespace nodeready, keys example.com/verified and
// example.com/unverified, the taint at node creation) on a real control plane, and a new node
// is tainted by the overlay's creation policy, held, verified and released through it, with
// the new keys only. The simulated kubelet runs the agent binary for the overlay's image.
func TestApplyExampleOverlay(t *testing.T) {
	repo := framework.RepoRoot(t)
	agent := os.Getenv(framework.AgentBinaryEnv)
	if agent == "" {
		agent = filepath.Join(repo, "bin", "nodeready")
	}
	cp := framework.New(t, framework.Options{ControlPlaneOnly: true}).ControlPlane()
	ctx, client := t.Context(), cp.Client()

	out := kubectl(t, cp, "apply", "-k", filepath.Join(repo, "kustomize", "example"))
	t.Logf("kubectl apply -k kustomize/example:\n%s", out)

	// Loopback settings, as the harness sets them (harness.Cluster.ApplyConfig): the dns check
	// asks the node's own server below. No endpoints check: a loopback API server publishes no
	// endpoints for default/kubernetes (see harness.BackendService), and the harness's stand-in
	// Service is not the point here.
	cm, err := client.CoreV1().ConfigMaps(kustomize.NewNamespace).Get(ctx, "nodeready-config", metav1.GetOptions{})
	require.NoError(t, err, "the ConfigMap moved to the overlay's namespace")
	for k, v := range map[string]string{
		"CHECKS":             "dns,tcp,apiserver",
		"DNS_TEST_DOMAINS":   framework.DNSName,
		"RETRY_BACKOFF_BASE": "200ms",
		"RETRY_BACKOFF_MAX":  "1s",
		"CHECK_TIMEOUT":      "5s",
		"LOG_LEVEL":          "debug",
	} {
		require.Contains(t, cm.Data, k)
		cm.Data[k] = v
	}
	_, err = client.CoreV1().ConfigMaps(kustomize.NewNamespace).Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)

	dns, err := dnstest.NewServer(map[string][]netip.Addr{framework.DNSName: {netip.MustParseAddr("10.96.0.1")}})
	require.NoError(t, err)
	t.Cleanup(dns.Close)
	host, port := cp.APIServerHostPort()
	logDir := filepath.Join(cp.LogDir(), "kubelet") // kept with the control plane's after a failure
	k, err := kubelet.New(client, kubelet.Options{
		AgentBinary:   agent,
		AgentImage:    strings.Split(kustomize.NewImage, ":")[0],
		APIServerURL:  cp.APIServerURL(),
		CAFile:        cp.CAFile(),
		APIServerHost: host,
		APIServerPort: port,
		LogDir:        logDir,
		NodeEnv:       func(string) map[string]string { return map[string]string{"DNS_NAMESERVER": dns.Addr()} },
	})
	require.NoError(t, err)
	require.NoError(t, k.Run(ctx))
	t.Cleanup(k.Stop)

	// The node registers without nodeready's taint; the overlay's creation policy adds the
	// new one. Another owner's taint must survive the release.
	foreign := corev1.Taint{Key: "example.com/dedicated", Value: "infra", Effect: corev1.TaintEffectPreferNoSchedule}
	// The API server loads admission policies in the background: wait until a server-side
	// dry run of a node creation comes back with the overlay's taint.
	err = framework.Poll(t, func(ctx context.Context) (bool, error) {
		n, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: "policy-check", Labels: map[string]string{corev1.LabelOSStable: "linux"},
		}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && slices.Contains(n.Spec.Taints, exampleTaint), nil
	})
	require.NoError(t, err, "the creation policy never added %s", exampleTaint.ToString())

	const node = "kustomized-0"
	w, err := client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + node})
	require.NoError(t, err)
	defer w.Stop()
	require.NoError(t, k.AddNode(ctx, node, kubelet.NodeOptions{Taints: []corev1.Taint{foreign}}))
	select {
	case ev := <-w.ResultChan():
		created, ok := ev.Object.(*corev1.Node)
		require.True(t, ok, "first watch event: %v", ev)
		assert.Contains(t, created.Spec.Taints, exampleTaint, "the node as created, by the overlay's policy")
		assert.Contains(t, created.Spec.Taints, foreign)
	case <-ctx.Done():
		t.Fatal("no watch event for the new node")
	}
	w.Stop()

	var last *corev1.Node
	err = framework.Poll(t, func(ctx context.Context) (bool, error) {
		n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = n
		return n.Labels[kustomize.NewLabel] == "true" && len(n.Spec.Taints) == 1, nil
	})
	require.NoError(t, err, "node not released; last seen %+v", last)
	assert.Equal(t, []corev1.Taint{foreign}, last.Spec.Taints)
	assert.NotContains(t, last.Labels, wellknown.VerifiedLabel)
	assert.Contains(t, last.Annotations, kustomize.NewLabel+"-at", "the completion record follows the label")
	cond := framework.AgentCondition(last)
	require.NotNil(t, cond)
	assert.Equal(t, corev1.ConditionTrue, cond.Status)
	assert.Equal(t, string(wellknown.Verified), cond.Reason)

	// The agent ran in the overlay's namespace, and its pod is gone.
	logs, err := filepath.Glob(filepath.Join(logDir, kustomize.NewNamespace+"_nodeready-*.log"))
	require.NoError(t, err)
	assert.NotEmpty(t, logs, "no log of an agent pod in namespace %s in %s", kustomize.NewNamespace, logDir)
	err = framework.Poll(t, func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(kustomize.NewNamespace).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		return err == nil && len(pods.Items) == 0, nil
	})
	require.NoError(t, err, "the agent pod is deleted once the node is labelled")

	// The own-node policy follows the ServiceAccount to its namespace: the agent's identity,
	// as if from another node's pod, is refused a write that RBAC alone would let through.
	sa := "system:serviceaccount:" + kustomize.NewNamespace + ":nodeready"
	out, err = cp.Kubectl(t.Context(), nil, "--as", sa, "--as-group", "system:serviceaccounts", "--as-group", "system:authenticated",
		"--as-user-extra", "authentication.kubernetes.io/node-name=another-node", "label", "node", node, kustomize.NewLabel+"-")
	require.Error(t, err, out)
	assert.Contains(t, out, "nodeready: write to node "+node+" refused: the agent on node another-node may change only its own node")
}

// TestApplyPrefixedOverlay: an overlay that renames everything (namePrefix prod-) and moves
// nodeready to another namespace, applied with `kubectl apply -k` on the real control plane.
// The ServiceAccount is now nodeready/prod-nodeready, and its ClusterRoleBinding grants it
// patch on every node; the own-node policy must still refuse it a write to another node.
func TestApplyPrefixedOverlay(t *testing.T) {
	repo := framework.RepoRoot(t)
	cp := framework.New(t, framework.Options{ControlPlaneOnly: true}).ControlPlane()
	out := kubectl(t, cp, "apply", "-k", kustomize.PrefixedOverlay(t, repo))
	t.Logf("kubectl apply -k of the prefixed overlay:\n%s", out)
	_, err := cp.Client().CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "prefixed-0"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	// As the renamed agent's pod-bound token on another node would: RBAC lets it through,
	// the policy (loaded in the background) refuses it.
	sa := "system:serviceaccount:" + kustomize.NewNamespace + ":prod-nodeready"
	var last string
	err = framework.Poll(t, func(ctx context.Context) (bool, error) {
		out, err := cp.Kubectl(t.Context(), nil, "--as", sa, "--as-group", "system:serviceaccounts", "--as-group", "system:authenticated",
			"--as-user-extra", "authentication.kubernetes.io/node-name=another-node", "label", "node", "prefixed-0", "--dry-run=server", "example.com/x=y")
		last = out
		return err != nil && strings.Contains(out, "nodeready: write to node prefixed-0 refused: the agent on node another-node may change only its own node"), nil
	})
	require.NoError(t, err, "the own-node policy never refused the renamed ServiceAccount; last answer %s", last)
	// Not RBAC: the same identity may write its own node's condition-free fields it owns.
	out, err = cp.Kubectl(t.Context(), nil, "--as", sa, "--as-group", "system:serviceaccounts", "--as-group", "system:authenticated",
		"--as-user-extra", "authentication.kubernetes.io/node-name=prefixed-0", "label", "node", "prefixed-0", "--dry-run=server", "node-ready/verified=true")
	require.NoError(t, err, "the agent's own label on its own node: %s", out)
}

func kubectl(t *testing.T, cp *controlplane.ControlPlane, args ...string) string {
	t.Helper()
	out, err := cp.Kubectl(t.Context(), nil, args...)
	require.NoError(t, err, out)
	return out
}
