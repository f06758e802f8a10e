package nodepatch

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// operation is one RFC 6902 JSON Patch operation.
type operation struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"` // ignored by a remove
}

// plan returns the JSON Patch that releases node with the label's value and sets annotations, or
// nil when the node is already verified (then annotations are not written
// either: an already verified node gets no write at all).
//
// spec.taints is an atomic list, so it is replaced whole, guarded by a test
// of the whole list as read: if any writer changed a taint since, the test
// fails (422) and nothing is written. Labels are a map: adding one key never
// touches the others, so no lock is needed there. When the node has no labels
// at all, the label map itself is created, guarded by a test of the
// resourceVersion so a concurrent first label cannot be overwritten.
func (p *Patcher) plan(node *corev1.Node, value string, annotations map[string]string) []byte {
	if p.Verified(node) {
		return nil
	}
	return releaseOps(p, node.ResourceVersion, node.Spec.Taints, p.removes, node.Labels, node.Annotations, value, annotations)
}

// releaseOps returns the JSON Patch of a release over the node's state: the taint list
// tested and replaced without the startup taint when it holds it, the label set to value
// and the annotations set. T is a taint as these API types decode it (plan) or as the API
// server sent it (rawPlan); startup tells the startup taint.
func releaseOps[T any](p *Patcher, rv string, taints []T, startup func(T) bool, labels, have map[string]string, value string, annotations map[string]string) []byte {
	var ops []operation
	if kept := slices.DeleteFunc(slices.Clone(taints), startup); len(kept) < len(taints) {
		ops = append(ops,
			operation{Op: "test", Path: "/spec/taints", Value: taints},
			operation{Op: "replace", Path: "/spec/taints", Value: kept})
	}
	setLabels := maps.Clone(p.spec.Labels)
	if setLabels == nil {
		setLabels = map[string]string{}
	}
	setLabels[p.spec.LabelKey] = value
	ops = append(ops, mapOps(rv, "/metadata/labels", labels, setLabels)...)
	ops = append(ops, mapOps(rv, "/metadata/annotations", have, annotations)...)
	ops = append(ops, dropOps("/metadata/annotations", have, p.spec.Drop)...)
	return mustJSON(ops)
}

// mustJSON encodes a patch. Only strings and API types are encoded, so it
// cannot fail.
func mustJSON(ops []operation) []byte {
	patch, err := json.Marshal(ops)
	if err != nil {
		panic(err)
	}
	return patch
}

// mapOps sets the keys of want in the string map at path. Adding a key never
// touches the others, so no lock is needed, except when the map does not
// exist yet: then it is created whole, guarded by a test of the
// resourceVersion so a concurrent first key cannot be overwritten.
func mapOps(resourceVersion, path string, have, want map[string]string) []operation {
	var ops []operation
	if have == nil && len(want) > 0 {
		return []operation{
			{Op: "test", Path: "/metadata/resourceVersion", Value: resourceVersion},
			{Op: "add", Path: path, Value: want},
		}
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if v, ok := have[k]; !ok || v != want[k] {
			ops = append(ops, operation{Op: "add", Path: path + "/" + escape(k), Value: want[k]})
		}
	}
	return ops
}

// dropOps removes the keys of drop that the string map at path has. A key the
// node as read does not have is left alone: removing it would fail the patch.
func dropOps(path string, have map[string]string, drop []string) []operation {
	var ops []operation
	for _, k := range drop {
		if _, ok := have[k]; ok {
			ops = append(ops, operation{Op: "remove", Path: path + "/" + escape(k)})
		}
	}
	return ops
}

// escape encodes a map key as a JSON Pointer reference token (RFC 6901).
func escape(key string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
}
