package nodepatch

import (
	"context"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeready/nodeready/internal/wellknown"
)

// Taint puts the startup taints back on a node that is being verified again
// (its label was removed), so no new workloads land on it while the checks
// run. It writes only when the node has neither the label nor any of the taints and
// carries nodeready's completion record (Spec.Record): a node that predates
// the install has neither label nor taint too, and nodeready never taints a
// node it has not verified before. The write is under the same lock as
// Release: a test of the whole taint list as read.
func (p *Patcher) Taint(ctx context.Context) (bool, error) {
	tainted := false
	err := p.retry(ctx, func() error {
		node, err := p.get(ctx)
		if err != nil {
			return err
		}
		if s := p.state(node); s.Tainted || s.Labelled || !s.VerifiedBefore {
			return nil
		}
		ops := []operation{{Op: "test", Path: "/spec/taints", Value: node.Spec.Taints}}
		for _, t := range p.spec.Taints {
			ops = append(ops, operation{Op: "add", Path: "/spec/taints/-", Value: t})
		}
		if len(node.Spec.Taints) == 0 { // no list to append to yet
			ops = []operation{
				{Op: "test", Path: "/metadata/resourceVersion", Value: node.ResourceVersion},
				{Op: "add", Path: "/spec/taints", Value: p.spec.Taints},
			}
		}
		if _, err := p.client.CoreV1().Nodes().Patch(ctx, p.node, types.JSONPatchType, mustJSON(ops),
			metav1.PatchOptions{FieldManager: wellknown.FieldManager}); err != nil {
			return p.classify("taint", err)
		}
		tainted = true
		return nil
	})
	return tainted, err
}

// Untaint removes the startup taints from a node that nodeready will not
// release: the uninstall's, for a node still held when its agent is gone. It
// adds no label (the node was not verified) and writes nothing when the node
// carries none of the taints; it reports whether it wrote. Every other taint
// stays, under the same lock as Release: a test of the whole taint list as read.
func (p *Patcher) Untaint(ctx context.Context, fieldManager string) (bool, error) {
	wrote := false
	err := p.retry(ctx, func() error {
		node, err := p.get(ctx)
		if err != nil {
			return err
		}
		kept := slices.DeleteFunc(slices.Clone(node.Spec.Taints), p.matches)
		if len(kept) == len(node.Spec.Taints) {
			return nil
		}
		ops := []operation{
			{Op: "test", Path: "/spec/taints", Value: node.Spec.Taints},
			{Op: "replace", Path: "/spec/taints", Value: kept},
		}
		if _, err := p.client.CoreV1().Nodes().Patch(ctx, p.node, types.JSONPatchType, mustJSON(ops),
			metav1.PatchOptions{FieldManager: fieldManager}); err != nil {
			return p.classify("untaint", err)
		}
		wrote = true
		return nil
	})
	return wrote, err
}
