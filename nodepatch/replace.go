package nodepatch

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// NodeClaims is Karpenter's v1 NodeClaim resource.
var NodeClaims = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodeclaims"}

// Replace deletes the node's Karpenter NodeClaim when there is one, so
// Karpenter drains the node and launches a replacement, and the Node itself
// otherwise. It returns what it deleted, such as "NodeClaim default-x7k2p".
// The deletion is preconditioned on the UID it read, so a node of the same
// name that came back in the meantime is not deleted.
func (p *Patcher) Replace(ctx context.Context, dyn dynamic.Interface) (string, error) {
	claim, err := p.findNodeClaim(ctx, dyn)
	if err != nil {
		return "", err
	}
	if claim != nil {
		uid := claim.GetUID()
		err := dyn.Resource(NodeClaims).Delete(ctx, claim.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) {
			return "", p.classify("delete NodeClaim of", err)
		}
		return "NodeClaim " + claim.GetName(), nil
	}
	node, err := p.get(ctx)
	if err != nil {
		return "", err
	}
	err = p.client.CoreV1().Nodes().Delete(ctx, p.node, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &node.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return "", p.classify("delete", err)
	}
	return "Node " + p.node, nil
}

// findNodeClaim returns the NodeClaim whose status.nodeName is the node, or
// nil when there is none or the cluster has no NodeClaim resource.
func (p *Patcher) findNodeClaim(ctx context.Context, dyn dynamic.Interface) (*unstructured.Unstructured, error) {
	if dyn == nil {
		return nil, nil
	}
	list, err := dyn.Resource(NodeClaims).List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return nil, nil // no Karpenter here
	case err != nil:
		return nil, fmt.Errorf("list NodeClaims: %w", p.classify("find NodeClaim of", err))
	}
	for i := range list.Items {
		name, _, _ := unstructured.NestedString(list.Items[i].Object, "status", "nodeName")
		if name == p.node {
			return &list.Items[i], nil
		}
	}
	return nil, nil
}
