package nodepatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
)

// rawNode is what rawPlan needs of a Node as the API server sends it: its taints kept as
// JSON, so fields this client's API types do not know survive.
type rawNode struct {
	Metadata struct {
		ResourceVersion string            `json:"resourceVersion"`
		Labels          map[string]string `json:"labels"`
		Annotations     map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Taints []json.RawMessage `json:"taints"`
	} `json:"spec"`
}

// errNoRawReads: the client has no REST client of its own to read the node as JSON.
var errNoRawReads = errors.New("the client cannot read the node as JSON")

// rawPlan is plan over the node as the API server sends it: the taint list is tested and
// replaced as JSON, so a taint's field that a newer Kubernetes stores and these types do not
// know neither fails the test forever nor is dropped from the taints kept. One read more
// than plan; only after a lock lost for no visible reason.
func (p *Patcher) rawPlan(ctx context.Context, value string, annotations map[string]string) ([]byte, error) {
	rc := p.client.CoreV1().RESTClient()
	if rc == nil || reflect.ValueOf(rc).IsNil() {
		return nil, errNoRawReads
	}
	body, err := rc.Get().Resource("nodes").Name(p.node).Do(ctx).Raw()
	if err != nil {
		return nil, p.classify("get", err)
	}
	var node rawNode
	if err := json.Unmarshal(body, &node); err != nil {
		return nil, fmt.Errorf("read node %s: %w", p.node, err)
	}
	var ops []operation
	kept := make([]json.RawMessage, 0, len(node.Spec.Taints))
	for _, t := range node.Spec.Taints {
		var known struct{ Key, Effect string }
		if err := json.Unmarshal(t, &known); err != nil {
			return nil, fmt.Errorf("read taints of node %s: %w", p.node, err)
		}
		if known.Key != p.spec.Taint.Key || known.Effect != string(p.spec.Taint.Effect) {
			kept = append(kept, t)
		}
	}
	if len(kept) < len(node.Spec.Taints) {
		ops = append(ops,
			operation{Op: "test", Path: "/spec/taints", Value: node.Spec.Taints},
			operation{Op: "replace", Path: "/spec/taints", Value: kept})
	}
	// Labels and annotations are maps, written as plan writes them.
	rv := node.Metadata.ResourceVersion
	ops = append(ops, mapOps(rv, "/metadata/labels", node.Metadata.Labels, map[string]string{p.spec.LabelKey: value})...)
	ops = append(ops, mapOps(rv, "/metadata/annotations", node.Metadata.Annotations, annotations)...)
	return mustJSON(ops), nil
}
