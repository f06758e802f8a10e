package nodepatch

import (
	"encoding/json"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// operation is one RFC 6902 JSON Patch operation.
type operation struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// plan returns the JSON Patch that verifies node, or nil when it already is.
//
// spec.taints is an atomic list, so it is replaced whole, guarded by a test
// of the whole list as read: if any writer changed a taint since, the test
// fails (422) and nothing is written. Labels are a map: adding one key never
// touches the others, so no lock is needed there. When the node has no labels
// at all, the label map itself is created, guarded by a test of the
// resourceVersion so a concurrent first label cannot be overwritten.
func (p *Patcher) plan(node *corev1.Node) []byte {
	var ops []operation
	if p.hasTaint(node) {
		kept := make([]corev1.Taint, 0, len(node.Spec.Taints))
		for _, t := range node.Spec.Taints {
			if !p.matches(t) {
				kept = append(kept, t)
			}
		}
		ops = append(ops,
			operation{Op: "test", Path: "/spec/taints", Value: node.Spec.Taints},
			operation{Op: "replace", Path: "/spec/taints", Value: kept})
	}
	switch {
	case node.Labels[p.spec.LabelKey] == p.spec.LabelValue:
	case node.Labels == nil:
		ops = append(ops,
			operation{Op: "test", Path: "/metadata/resourceVersion", Value: node.ResourceVersion},
			operation{Op: "add", Path: "/metadata/labels", Value: map[string]string{p.spec.LabelKey: p.spec.LabelValue}})
	default:
		ops = append(ops, operation{Op: "add", Path: "/metadata/labels/" + escape(p.spec.LabelKey), Value: p.spec.LabelValue})
	}
	if len(ops) == 0 {
		return nil
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		// Only strings and API types are marshalled: this cannot fail.
		panic(err)
	}
	return patch
}

// escape encodes a map key as a JSON Pointer reference token (RFC 6901).
func escape(key string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
}
