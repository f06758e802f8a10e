package nodepatch

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeready/nodeready/internal/wellknown"
)

// Mark sets labels and annotations on the node, the evidence other agents read
// of it before a failure action: the config label and the failing checks. It
// writes nothing when the node already carries them. Keys of a map are added
// or replaced one by one, so no lock is needed and no other key can be lost
// (mapOps); it reports whether it wrote.
func (p *Patcher) Mark(ctx context.Context, labels, annotations map[string]string) (bool, error) {
	wrote := false
	read := p.latest
	err := p.retry(ctx, func() error {
		node, err := read(ctx)
		read = p.get // a retry follows a lost lock: the watch may not show the newer node yet
		if err != nil {
			return err
		}
		ops := append(mapOps(node.ResourceVersion, "/metadata/labels", node.Labels, labels),
			mapOps(node.ResourceVersion, "/metadata/annotations", node.Annotations, annotations)...)
		if len(ops) == 0 {
			return nil
		}
		node, err = p.client.CoreV1().Nodes().Patch(ctx, p.node, types.JSONPatchType, mustJSON(ops),
			metav1.PatchOptions{FieldManager: wellknown.FieldManager})
		if err != nil {
			return p.classify("mark", err)
		}
		p.wrote(node)
		wrote = true
		return nil
	})
	return wrote, err
}
