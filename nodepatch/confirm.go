package nodepatch

import (
	"context"
	"errors"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Confirm finds out whether a release that ended with ErrUnknownOutcome
// landed after all: it reports whether the node is verified now. The watch
// answers when it shows the node verified with the annotations that write
// carried; else the node is read once, and any verified node counts (an
// earlier write that got no answer may be the one that landed). A confirmed
// node is what Settle then watches from, as after Release.
func (p *Patcher) Confirm(ctx context.Context, annotations map[string]string) (bool, error) {
	if node := p.watched(); node != nil && len(annotations) > 0 && p.Verified(node) && carries(node, annotations) {
		p.last, p.confirmedRV = node, node.ResourceVersion
		return true, nil
	}
	node, err := p.get(ctx)
	if err != nil {
		return false, err
	}
	if !p.Verified(node) {
		return false, nil
	}
	p.confirmedRV = node.ResourceVersion
	return true, nil
}

// watched returns the node as the watch shows it, or nil before the watch
// has shown it.
func (p *Patcher) watched() *corev1.Node {
	v := p.view
	if v == nil || !isDone(v.synced) {
		return nil
	}
	obj, exists, err := v.store.GetByKey(p.node)
	if err != nil || !exists {
		return nil
	}
	node, _ := obj.(*corev1.Node)
	return node
}

// carries reports whether node has every one of annotations.
func carries(node *corev1.Node, annotations map[string]string) bool {
	for k, v := range annotations {
		if got, ok := node.Annotations[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// unanswered reports whether a write that failed may still have been
// stored: no answer came (a timeout, a lost connection, the context ended),
// or a server error, which can come after the write (a storage timeout, a
// failure while answering). A 4xx answer, 429 among them, means the API
// server turned the write down before storing it.
func unanswered(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true
	}
	return status.Status().Code >= http.StatusInternalServerError
}
