package nodepatch

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// NodeClaims is Karpenter's v1 NodeClaim resource.
var NodeClaims = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodeclaims"}

// controlPlaneLabels mark a control-plane node (the second is the legacy
// name); such a node is never deleted.
var controlPlaneLabels = []string{"node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"}

// Replace deletes the node's Karpenter NodeClaim when there is one, so
// Karpenter drains the node and launches a replacement, and the Node itself
// otherwise. It returns what it deleted, such as "NodeClaim default-x7k2p".
// Karpenter makes the NodeClaim the Node's owner at registration, so the
// Node's ownerReference names it and no NodeClaim is read. Each deletion is
// preconditioned on the UID the Node records (its own, or its owner's), so
// an object of the same name that came in the meantime is not deleted. It
// refuses, before any write and on the node as read right then, a control-plane node
// (ErrControlPlane), a node without the startup taint (ErrNotHeld: the taint is what kept
// workloads away) and a node nodeready verified before (ErrVerifiedBefore).
func (p *Patcher) Replace(ctx context.Context, dyn dynamic.Interface) (string, error) {
	node, err := p.get(ctx)
	if err != nil {
		return "", err
	}
	for _, l := range controlPlaneLabels {
		if _, ok := node.Labels[l]; ok {
			return "", fmt.Errorf("node %s is labelled %s: %w", p.node, l, ErrControlPlane)
		}
	}
	if !p.hasTaint(node) {
		return "", fmt.Errorf("node %s has no taint %s: %w", p.node, p.spec.taintNames(), ErrNotHeld)
	}
	if at, ok := node.Annotations[p.spec.Record()]; ok {
		return "", fmt.Errorf("node %s was released by nodeready at %s (annotation %s): %w", p.node, at, p.spec.Record(), ErrVerifiedBefore)
	}
	if owner := nodeClaimOwner(node); owner != nil && dyn != nil {
		uid := owner.UID
		err := dyn.Resource(NodeClaims).Delete(ctx, owner.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		// NotFound, or Conflict on the UID: the node's NodeClaim is gone
		// already, and with it the node. A NotFound for the resource type itself
		// (no NodeClaim CRD: Karpenter uninstalled) deleted nothing.
		if err != nil && (!apierrors.IsNotFound(err) || resourceNotServed(err)) && !apierrors.IsConflict(err) {
			return "", p.classify("delete NodeClaim of", err)
		}
		return "NodeClaim " + owner.Name, nil
	}
	err = p.client.CoreV1().Nodes().Delete(ctx, p.node, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &node.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return "", p.classify("delete", err)
	}
	return "Node " + p.node, nil
}

// resourceNotServed tells a 404 for the resource type (the API server serves no such
// resource: its Status names no object) from a 404 for the object.
func resourceNotServed(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d == nil || d.Name == ""
}

// nodeClaimOwner returns the Node's ownerReference to a Karpenter NodeClaim,
// or nil when it has none.
func nodeClaimOwner(node *corev1.Node) *metav1.OwnerReference {
	for i, ref := range node.OwnerReferences {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err == nil && gv.Group == NodeClaims.Group && ref.Kind == "NodeClaim" {
			return &node.OwnerReferences[i]
		}
	}
	return nil
}
