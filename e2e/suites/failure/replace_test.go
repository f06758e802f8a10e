package failure

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/kubelet"
	"github.com/nodeready/nodeready/internal/wellknown"
	"github.com/nodeready/nodeready/nodepatch"
)

// replaceEnv turns replace-node on for a node; maxRetries rounds until the failure.
func replaceEnv(maxRetries string) map[string]string {
	return map[string]string{"FAILURE_ACTION": "replace-node", "MAX_RETRIES": maxRetries}
}

// testReplaceNode installs manifests/replace-node/ and a NodeClaim CRD, then holds that a
// failing node's agent deletes the NodeClaim its Node's ownerReference names, and not the
// Node, without listing NodeClaims (the ClusterRole no longer allows it); deletes the Node
// when there is no NodeClaim; never touches another node's NodeClaim (which the
// own-NodeClaim policy refuses to its token); and replaces nothing when its pod is deleted
// first.
func testReplaceNode(t *testing.T, fw *framework.Framework) {
	ctx := t.Context()
	out, err := fw.KubectlContext(ctx, "apply", "-f", filepath.Join(fw.RepoRoot(), "manifests", "replace-node"))
	require.NoError(t, err)
	t.Logf("kubectl apply -f manifests/replace-node/:\n%s", out)
	claims := installNodeClaims(t, fw)

	fw.Run("the own NodeClaim, else the own Node; never another's", func(t *testing.T, fw *framework.Framework) {
		f := fw.NewFleet("replace")
		claimed, unclaimed, healthy := f.Name()+"-0", f.Name()+"-1", f.Name()+"-2"
		claimedClaim := createNodeClaim(t, claims, "default-claimed", claimed)
		healthyClaim := createNodeClaim(t, claims, "default-healthy", healthy)

		require.NoError(t, f.AddNode(ctx, claimed, framework.NodeOptions{BrokenDNS: true, Labels: karpenterLabels, Env: replaceEnv("2")}))
		registerNode(t, fw, claimed, claimedClaim)
		// Karpenter's termination finalizer, as on its nodes: once the NodeClaim is gone, the
		// garbage collector deletes the Node, which stays, terminating, with its agent running,
		// while Karpenter would drain it.
		setFinalizers(t, fw, claimed, []string{"karpenter.sh/termination"})
		t.Cleanup(func() { setFinalizers(t, fw, claimed, nil) })
		require.NoError(t, f.AddNode(ctx, unclaimed, framework.NodeOptions{BrokenDNS: true, Env: replaceEnv("2")}))
		require.NoError(t, f.AddNode(ctx, healthy, framework.NodeOptions{Labels: karpenterLabels, Env: replaceEnv("2")}))
		registerNode(t, fw, healthy, healthyClaim)

		// The node with a NodeClaim: the NodeClaim goes, the Node stays.
		err := framework.Poll(t, func(ctx context.Context) (bool, error) {
			_, err := claims.Get(ctx, claimedClaim.GetName(), metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		require.NoError(t, err, "NodeClaim %s of the failing node %s was not deleted", claimedClaim.GetName(), claimed)
		ev := fw.WaitEvent(claimed, "ReplacingNode")
		assert.Equal(t, corev1.EventTypeWarning, ev.Type)
		assert.Contains(t, ev.Note, "Deleted NodeClaim "+claimedClaim.GetName()+" because checks failed: dns ")
		cond := fw.WaitCondition(claimed, string(wellknown.Replacing))
		assert.Equal(t, corev1.ConditionFalse, cond.Status)
		assert.Contains(t, cond.Message, "dns "+framework.DNSName)
		// Karpenter would now drain and delete the node; the agent never does it itself:
		// it runs no more rounds (a second replacement would find no NodeClaim and delete
		// the Node) and waits for its pod's end.
		before := f.Rounds(claimed)
		time.Sleep(3 * time.Second) // three rounds of RETRY_BACKOFF_MAX
		assert.Equal(t, before, f.Rounds(claimed), "rounds after the replacement")
		assert.True(t, framework.IsTainted(fw.Node(claimed)))

		// The node without one: the Node goes.
		err = framework.Poll(t, func(ctx context.Context) (bool, error) {
			_, err := fw.Client().CoreV1().Nodes().Get(ctx, unclaimed, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		require.NoError(t, err, "the failing node %s without a NodeClaim was not deleted", unclaimed)
		ev = fw.WaitEvent(unclaimed, "ReplacingNode")
		assert.Contains(t, ev.Note, "Deleted Node "+unclaimed+" because checks failed: dns ")

		// The healthy node is verified; its NodeClaim was never written by any agent.
		require.NoError(t, f.WaitReleased(ctx, healthy))
		got, err := claims.Get(ctx, healthyClaim.GetName(), metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, healthyClaim.GetResourceVersion(), got.GetResourceVersion(), "NodeClaim of %s changed", healthy)
		assert.Nil(t, got.GetDeletionTimestamp())

		// And the policy would refuse it to the failing node's agent: its pod-bound token may
		// delete only the NodeClaim of its own node. A dry run first, until the policy is in
		// force; then for real.
		pods, err := f.AgentPods(ctx, claimed)
		require.NoError(t, err)
		require.Len(t, pods, 1)
		agentClaims := agentDynamicClient(t, fw, &pods[0]).Resource(nodepatch.NodeClaims)
		want := "nodeready: deletion of NodeClaim " + healthyClaim.GetName() + " refused: it is not the NodeClaim of node " + claimed
		var last error
		err = framework.Poll(t, func(ctx context.Context) (bool, error) {
			last = agentClaims.Delete(ctx, healthyClaim.GetName(), metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
			return apierrors.IsForbidden(last) && strings.Contains(last.Error(), want), nil
		})
		require.NoError(t, err, "the own-NodeClaim policy never refused the dry run; last %v", last)
		err = agentClaims.Delete(ctx, healthyClaim.GetName(), metav1.DeleteOptions{})
		require.True(t, apierrors.IsForbidden(err), "want 403, got %v", err)
		assert.Contains(t, err.Error(), want)
		got, err = claims.Get(ctx, healthyClaim.GetName(), metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, healthyClaim.GetResourceVersion(), got.GetResourceVersion())
	})

	// An operator releases a failing node by hand (removes the startup taint) before the
	// failure action: workloads may land there now, so the agent, which reads the node right
	// before it deletes anything, replaces nothing, and says why.
	fw.Run("a node whose startup taint was removed by hand is not replaced", func(t *testing.T, fw *framework.Framework) {
		f, node, claim, agent := failingKarpenterNode(t, fw, claims, "untainted", "4", 1) // the agent has seen the node held
		_, err := fw.KubectlContext(ctx, "taint", "node", node, wellknown.StartupTaint().Key+":"+string(wellknown.StartupTaint().Effect)+"-")
		require.NoError(t, err)

		ev := fw.WaitEvent(node, "ReplaceFailed")
		assert.Contains(t, ev.Note, "Not replacing node: node "+node+" has no taint")
		assert.Contains(t, ev.Note, "no longer carries the startup taint")
		require.NoError(t, f.WaitMetric(ctx, agent, "nodeready_rounds_total", 7), "rounds after the failure")
		got, err := claims.Get(ctx, claim.GetName(), metav1.GetOptions{})
		require.NoError(t, err, "NodeClaim %s of node %s", claim.GetName(), node)
		assert.Nil(t, got.GetDeletionTimestamp())
		n := fw.Node(node)
		assert.Nil(t, n.DeletionTimestamp)
		fw.RequireNoEvent(node, "ReplacingNode")
		cond := fw.WaitCondition(node, string(wellknown.ChecksFailed))
		assert.Contains(t, cond.Message, "dns "+framework.DNSName)
	})

	fw.Run("a SIGTERM before the failure replaces nothing", func(t *testing.T, fw *framework.Framework) {
		// The failure would be recorded after 1000 rounds: the pod is deleted long before.
		f, node, claim, agent := failingKarpenterNode(t, fw, claims, "sigterm", "1000", 3)

		_, err = fw.KubectlContext(ctx, "-n", framework.Namespace, "delete", "pod", agent.Name)
		require.NoError(t, err)
		err = framework.Poll(t, func(context.Context) (bool, error) {
			p, ok := f.Kubelet().Pod(agent.UID)
			return ok && p.Done && len(p.Exits) == 1, nil
		})
		require.NoError(t, err, "agent of pod %s did not end", agent.Name)
		p, _ := f.Kubelet().Pod(agent.UID)
		assert.Equal(t, 0, p.Exits[0].Code, "an abort is not a failure")
		assert.True(t, p.Exits[0].Signaled)
		assert.False(t, p.Exits[0].Killed)

		n := fw.Node(node)
		assert.Nil(t, n.DeletionTimestamp)
		assert.True(t, framework.IsTainted(n))
		// The rounds before held the node and said why; the abort recorded no failure.
		if cond := framework.AgentCondition(n); assert.NotNil(t, cond) {
			assert.Equal(t, string(wellknown.ChecksFailing), cond.Reason, "an abort records no failure")
		}
		got, err := claims.Get(ctx, claim.GetName(), metav1.GetOptions{})
		require.NoError(t, err, "NodeClaim %s of node %s", claim.GetName(), node)
		assert.Nil(t, got.GetDeletionTimestamp())
		assert.Equal(t, claim.GetResourceVersion(), got.GetResourceVersion())
		for _, reason := range []string{"ReplacingNode", "ReplaceFailed", "VerificationFailed", "CheckFailed"} {
			fw.RequireNoEvent(node, reason)
		}
	})
}

// failingKarpenterNode adds a node of a new fleet named fleet whose dns check fails, with
// replace-node after maxRetries rounds, registers it as Karpenter would with a NodeClaim of
// its own, and waits until its agent has run rounds rounds.
func failingKarpenterNode(t *testing.T, fw *framework.Framework, claims dynamic.NamespaceableResourceInterface, fleet, maxRetries string,
	rounds float64) (*framework.Fleet, string, *unstructured.Unstructured, kubelet.PodInfo) {
	t.Helper()
	ctx := t.Context()
	f := fw.NewFleet(fleet)
	// A healthy node of the same configuration: the fleet's evidence that the failure is
	// the failing node's own.
	healthy := f.Name() + "-ok"
	require.NoError(t, f.AddNode(ctx, healthy, framework.NodeOptions{Env: replaceEnv(maxRetries)}))
	require.NoError(t, f.WaitReleased(ctx, healthy))
	node := f.Name() + "-0"
	claim := createNodeClaim(t, claims, "default-"+fleet, node)
	require.NoError(t, f.AddNode(ctx, node, framework.NodeOptions{BrokenDNS: true, Labels: karpenterLabels, Env: replaceEnv(maxRetries)}))
	registerNode(t, fw, node, claim)
	agent, err := f.WaitAgentRunning(ctx, node)
	require.NoError(t, err)
	require.NoError(t, f.WaitMetric(ctx, agent, "nodeready_rounds_total", rounds))
	return f, node, claim, agent
}

// karpenterLabels are on a Karpenter node from its creation: the NodePool that launched it.
var karpenterLabels = map[string]string{"karpenter.sh/nodepool": "default"}

// registerNode does to the Node what Karpenter's registration does, in one patch: the
// NodeClaim becomes the Node's owner (apiVersion karpenter.sh/v1, kind NodeClaim, its name
// and uid, blockOwnerDeletion) and the node is labelled karpenter.sh/registered=true.
// Karpenter's termination finalizer is left out, so the test can remove the node. These
// tests hold the agent's side (RBAC, the own-NodeClaim policy, a node without a NodeClaim);
// TestKarpenter in e2e/suites/verify runs replace-node against the real Karpenter.
func registerNode(t *testing.T, fw *framework.Framework, node string, claim *unstructured.Unstructured) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"labels": map[string]string{"karpenter.sh/registered": "true"},
		"ownerReferences": []metav1.OwnerReference{{
			APIVersion:         claim.GetAPIVersion(),
			Kind:               claim.GetKind(),
			Name:               claim.GetName(),
			UID:                claim.GetUID(),
			BlockOwnerDeletion: ptr.To(true),
		}},
	}})
	require.NoError(t, err)
	_, err = fw.Client().CoreV1().Nodes().Patch(t.Context(), node, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err, "register node %s", node)
}

// setFinalizers sets the node's finalizers (none: nil), as Karpenter sets its own.
func setFinalizers(t *testing.T, fw *framework.Framework, node string, finalizers []string) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": finalizers}})
	require.NoError(t, err)
	_, err = fw.Client().CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("set the finalizers of node %s: %v", node, err)
	}
}

// createNodeClaim creates a NodeClaim whose status names node, as Karpenter's once the node
// registered, and deletes it when the test ends if it is still there.
func createNodeClaim(t *testing.T, claims dynamic.NamespaceableResourceInterface, name, node string) *unstructured.Unstructured {
	t.Helper()
	ctx := t.Context()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "karpenter.sh/v1",
		"kind":       "NodeClaim",
		"metadata":   map[string]any{"name": name},
		"spec":       map[string]any{"nodeClassRef": map[string]any{"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}},
	}}
	created, err := claims.Create(ctx, obj, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, unstructured.SetNestedField(created.Object, node, "status", "nodeName"))
	created, err = claims.UpdateStatus(ctx, created, metav1.UpdateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		err := claims.Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cleanup: delete NodeClaim %s: %v", name, err)
		}
	})
	return created
}

// boundToken returns a token of the agent's ServiceAccount bound to pod, as the kubelet
// mounts one: the API server puts the pod's node into it.
// agentDynamicClient returns a dynamic client with the token the kubelet gets for the pod.
func agentDynamicClient(t *testing.T, fw *framework.Framework, pod *corev1.Pod) dynamic.Interface {
	t.Helper()
	cp := fw.ControlPlane()
	token, err := cp.PodToken(t.Context(), pod.Namespace, pod.Spec.ServiceAccountName, pod.Name, pod.UID)
	require.NoError(t, err)
	d, err := dynamic.NewForConfig(cp.TokenConfig(token))
	require.NoError(t, err)
	return d
}
