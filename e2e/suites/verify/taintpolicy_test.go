package verify

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/karpenter"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// The policies that name the startup taint key: the creation-time MutatingAdmissionPolicy
// puts the taint on, the own-node ValidatingAdmissionPolicy lets the agent remove only it.
var (
	creationPolicy    = filepath.Join("manifests", "node-creation", "startup-taint.yaml")
	ownNodePolicyFile = filepath.Join("manifests", "04-admission-policy.yaml")
)

const (
	creationPolicyName = "nodeready-startup-taint"
	// probeNode is a Node without kubelet that no DaemonSet and no creation policy serves
	// (no kubernetes.io/os label): the own-node policy is tried on it.
	probeNode = "nodeready-policy-probe"
)

// useTaintKey puts the creation-time policy in force with the startup taint key instead of
// nodeready's, and the own-node policy with it, and waits until both are. Cleanup puts the
// files back as they are (and removes the creation-time policy if it was not there), also
// when the test fails: the other subtests share the cluster. The DaemonSet tolerates the key
// meanwhile, as the chart's config.taintKey and the keys component make it.
func useTaintKey(t *testing.T, fw *framework.Framework, key string) {
	t.Helper()
	ctx := t.Context()
	fw.TolerateKey(key)
	_, err := fw.Client().AdmissionregistrationV1().MutatingAdmissionPolicies().Get(ctx, creationPolicyName, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		require.NoError(t, err)
	}
	hadCreationPolicy := err == nil
	probe := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: probeNode},
		// A taint list to append to, which nothing else changes.
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "example.com/probe", Effect: corev1.TaintEffectNoSchedule}}},
	}
	_, err = fw.Client().CoreV1().Nodes().Create(ctx, probe, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		restore := []string{"apply", "-f", filepath.Join(fw.RepoRoot(), creationPolicy)}
		if !hadCreationPolicy {
			restore = []string{"delete", "--ignore-not-found", "-f", filepath.Join(fw.RepoRoot(), creationPolicy)}
		}
		for _, args := range [][]string{{"apply", "-f", filepath.Join(fw.RepoRoot(), ownNodePolicyFile)}, restore} {
			if out, err := fw.KubectlContext(ctx, args...); err != nil {
				t.Errorf("cleanup: kubectl %s: %v: %s", strings.Join(args, " "), err, out)
			}
		}
		want := ""
		if hadCreationPolicy {
			want = wellknown.StartupTaint().Key
		}
		if err := waitTaintPolicies(ctx, t, fw, want, wellknown.StartupTaint().Key); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		if err := fw.Client().CoreV1().Nodes().Delete(ctx, probeNode, metav1.DeleteOptions{}); err != nil {
			t.Errorf("cleanup: delete node %s: %v", probeNode, err)
		}
	})

	start := time.Now()
	dir := t.TempDir()
	for _, file := range []string{ownNodePolicyFile, creationPolicy} {
		data, err := os.ReadFile(filepath.Join(fw.RepoRoot(), file))
		require.NoError(t, err)
		path := filepath.Join(dir, filepath.Base(file))
		require.NoError(t, os.WriteFile(path, []byte(withTaintKey(t, file, string(data), key)), 0o644))
		out, err := fw.KubectlContext(ctx, "apply", "-f", path)
		require.NoError(t, err, "kubectl apply -f %s (%s): %s", path, file, out)
	}
	require.NoError(t, waitTaintPolicies(ctx, t, fw, key, key))
	t.Logf("policies with taint key %s in force after %v", key, time.Since(start).Round(time.Millisecond))
}

// withTaintKey returns a policy file's text with the startup taint key replaced by key: both
// policies name it once, as a CEL string literal in their variable taintKey.
func withTaintKey(t *testing.T, file, text, key string) string {
	t.Helper()
	literal := func(k string) string { return `"'` + k + `'"` }
	require.Equal(t, 1, strings.Count(text, literal(wellknown.StartupTaint().Key)), "%s names the startup taint key once", file)
	return strings.Replace(text, literal(wellknown.StartupTaint().Key), literal(key), 1)
}

// waitTaintPolicies waits until a Linux Node created now would get the startup taint with
// the key created ("": no startup taint), and the agent may put the taint with the key
// removable on its own node and no other: policies come into force asynchronously after
// they are written.
func waitTaintPolicies(ctx context.Context, t *testing.T, fw *framework.Framework, created, removable string) error {
	t.Helper()
	agent := impersonateAgent(t, fw, probeNode)
	keys := []string{wellknown.StartupTaint().Key, karpenter.ReadinessTaintKey}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		canary := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "nodeready-policy-canary", Labels: map[string]string{corev1.LabelOSStable: "linux"}}}
		n, err := fw.Client().CoreV1().Nodes().Create(ctx, canary, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, nil
		}
		for _, k := range keys {
			has := slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == k })
			if has != (k == created) {
				return false, nil
			}
		}
		for _, k := range keys {
			patch := `[{"op":"add","path":"/spec/taints/-","value":{"key":"` + k + `","value":"true","effect":"NoSchedule"}}]`
			_, err := agent.CoreV1().Nodes().Patch(ctx, probeNode, types.JSONPatchType, []byte(patch), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: wellknown.FieldManager})
			if (err == nil) != (k == removable) {
				return false, nil
			}
		}
		return true, nil
	})
}

// impersonateAgent returns a client that the own-node policy takes for an agent on node.
func impersonateAgent(t *testing.T, fw *framework.Framework, node string) kubernetes.Interface {
	t.Helper()
	cfg := fw.ControlPlane().RESTConfig()
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + framework.Namespace + ":nodeready",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + framework.Namespace, "system:authenticated"},
		Extra:    map[string][]string{"authentication.kubernetes.io/node-name": {node}},
	}
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return client
}
