package nodepatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
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
	// The fake clientset answers with a nil *rest.RESTClient inside the interface.
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
	var decodeErr error
	startup := func(t json.RawMessage) bool {
		var known corev1.Taint // the fields removes reads: key and effect
		if err := json.Unmarshal(t, &known); err != nil {
			decodeErr = err
			return false
		}
		return p.removes(known)
	}
	patch := releaseOps(p, node.Metadata.ResourceVersion, node.Spec.Taints, startup, node.Metadata.Labels, node.Metadata.Annotations, value, annotations)
	if decodeErr != nil {
		return nil, fmt.Errorf("read taints of node %s: %w", p.node, decodeErr)
	}
	return patch, nil
}
