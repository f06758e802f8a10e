package nodepatch

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

func nodeClaim(name, node string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
		"metadata": map[string]any{"name": name, "uid": "uid-" + name},
		"status":   map[string]any{"nodeName": node},
	}}
}

// ownedBy makes claim the owner of n, as Karpenter's registration does.
func ownedBy(n *corev1.Node, claim *unstructured.Unstructured) *corev1.Node {
	n.OwnerReferences = append(n.OwnerReferences, metav1.OwnerReference{
		APIVersion: claim.GetAPIVersion(), Kind: claim.GetKind(), Name: claim.GetName(), UID: claim.GetUID(),
		BlockOwnerDeletion: ptr.To(true),
	})
	return n
}

func newDynamic(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{NodeClaims: "NodeClaimList"}, objs...)
}

// dynVerbs lists the verbs and names of the dynamic client's actions.
func dynVerbs(dyn *dynamicfake.FakeDynamicClient) []string {
	var out []string
	for _, a := range dyn.Actions() {
		v := a.GetVerb()
		if d, ok := a.(k8stesting.DeleteAction); ok {
			v += " " + d.GetName()
		}
		out = append(out, v)
	}
	return out
}

func TestReplace(t *testing.T) {
	t.Run("the NodeClaim the ownerReference names is deleted, without a list", func(t *testing.T) {
		own, other := nodeClaim("default-b", nodeName), nodeClaim("default-a", "other-node")
		node := ownedBy(newNode(nil, startup), own)
		node.OwnerReferences = append([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "x", UID: "uid-x"}}, node.OwnerReferences...)
		p, client := newPatcher(t, node)
		dyn := newDynamic(other, own)
		what, err := p.Replace(t.Context(), dyn)
		require.NoError(t, err)
		assert.Equal(t, "NodeClaim default-b", what)
		require.Equal(t, []string{"delete default-b"}, dynVerbs(dyn), "one delete, no list or get")
		del := dyn.Actions()[0].(k8stesting.DeleteActionImpl)
		require.NotNil(t, del.DeleteOptions.Preconditions)
		assert.Equal(t, ptr.To(types.UID("uid-default-b")), del.DeleteOptions.Preconditions.UID)
		_, err = dyn.Resource(NodeClaims).Get(t.Context(), "default-a", metav1.GetOptions{})
		assert.NoError(t, err, "another node's NodeClaim stays")
		assert.Equal(t, []string{"get"}, verbs(client), "the Node is read, not deleted")
	})
	t.Run("a NodeClaim of that name but another uid is not deleted", func(t *testing.T) {
		own := nodeClaim("default-b", nodeName)
		node := ownedBy(newNode(nil, startup), own)
		successor := nodeClaim("default-b", "other-node")
		successor.SetUID("uid-successor")
		p, client := newPatcher(t, node)
		dyn := newDynamic(successor)
		dyn.PrependReactor("delete", "nodeclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
			uid := a.(k8stesting.DeleteActionImpl).DeleteOptions.Preconditions.UID
			if uid == nil || *uid != successor.GetUID() {
				return true, nil, apierrors.NewConflict(NodeClaims.GroupResource(), "default-b", assert.AnError)
			}
			return false, nil, nil
		})
		what, err := p.Replace(t.Context(), dyn)
		require.NoError(t, err, "the node's own NodeClaim is gone already")
		assert.Equal(t, "NodeClaim default-b", what)
		_, err = dyn.Resource(NodeClaims).Get(t.Context(), "default-b", metav1.GetOptions{})
		assert.NoError(t, err, "the successor stays")
		assert.Equal(t, []string{"get"}, verbs(client), "the Node is not deleted")
	})
	t.Run("without an owning NodeClaim the Node is deleted, NodeClaims untouched", func(t *testing.T) {
		p, client := newPatcher(t, newNode(nil, startup))
		dyn := newDynamic(nodeClaim("default-a", nodeName))
		what, err := p.Replace(t.Context(), dyn)
		require.NoError(t, err)
		assert.Equal(t, "Node "+nodeName, what)
		assert.Empty(t, dynVerbs(dyn))
		_, err = client.Tracker().Get(nodeGVR, "", nodeName)
		assert.True(t, apierrors.IsNotFound(err))
	})
	t.Run("forbidden is reported", func(t *testing.T) {
		p, client := newPatcher(t, newNode(nil, startup))
		client.PrependReactor("delete", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, nodeName, assert.AnError)
		})
		_, err := p.Replace(t.Context(), nil)
		require.ErrorIs(t, err, ErrForbidden)
	})
}

// assertNotReplaced: Replace refuses node, owned by a NodeClaim, with want, and writes
// neither the Node nor the NodeClaim.
func assertNotReplaced(t *testing.T, node *corev1.Node, want error) {
	t.Helper()
	claim := nodeClaim("default-x", nodeName)
	p, client := newPatcher(t, ownedBy(node, claim))
	dyn := newDynamic(claim)
	what, err := p.Replace(t.Context(), dyn)
	require.ErrorIs(t, err, want)
	assert.Empty(t, what)
	assert.Equal(t, []string{"get"}, verbs(client), "no write to the Node")
	assert.Empty(t, dynVerbs(dyn), "no write to its NodeClaim")
	assert.NotNil(t, getNode(t, client))
}

func TestReplaceNeverDeletesControlPlaneNodes(t *testing.T) {
	for _, label := range []string{"node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"} {
		t.Run(label, func(t *testing.T) {
			assertNotReplaced(t, newNode(map[string]string{label: ""}, startup), ErrControlPlane)
		})
	}
}

// TestReplaceOnlyWhileHeld: the node as read right before the deletion decides. A node whose
// startup taint someone removed may run workloads; a node nodeready released before may
// have served for long. Neither is deleted, nor its NodeClaim.
func TestReplaceOnlyWhileHeld(t *testing.T) {
	untainted := newNode(nil)
	reverified := newNode(nil, startup)
	reverified.Annotations = map[string]string{"node-ready/verified-at": "2026-01-02T03:04:05Z"}
	for name, tc := range map[string]struct {
		node *corev1.Node
		want error
	}{
		"the startup taint removed by hand": {untainted, ErrNotHeld},
		"released by nodeready before":      {reverified, ErrVerifiedBefore},
	} {
		t.Run(name, func(t *testing.T) {
			assertNotReplaced(t, tc.node, tc.want)
		})
	}
}

// TestReplaceWithoutTheNodeClaimResource: the Node names a NodeClaim, but the API server
// serves no NodeClaim resource (Karpenter uninstalled): the 404 is for the type, not the
// object, so nothing was deleted and the replacement failed; the Node is not deleted either.
func TestReplaceWithoutTheNodeClaimResource(t *testing.T) {
	claim := nodeClaim("default-x", nodeName)
	p, client := newPatcher(t, ownedBy(newNode(nil, startup), claim))
	dyn := newDynamic()
	dyn.PrependReactor("delete", "nodeclaims", func(k8stesting.Action) (bool, runtime.Object, error) {
		// As kube-apiserver answers for a resource it does not serve.
		return true, nil, &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 404,
			Reason: metav1.StatusReasonNotFound, Message: "the server could not find the requested resource", Details: &metav1.StatusDetails{}}}
	})
	what, err := p.Replace(t.Context(), dyn)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the server could not find the requested resource")
	assert.Empty(t, what)
	assert.Equal(t, []string{"get"}, verbs(client), "the Node is not deleted instead")

	// A NodeClaim that is gone (404 naming it) is gone: nothing left to do.
	gone := newDynamic()
	p, _ = newPatcher(t, ownedBy(newNode(nil, startup), claim))
	what, err = p.Replace(t.Context(), gone)
	require.NoError(t, err)
	assert.Equal(t, "NodeClaim default-x", what)
}
