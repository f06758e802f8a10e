package nodepatch

import (
	"context"
	"errors"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Confirm finds out whether a release that ended with ErrUnknownOutcome
// landed after all: it reports whether the node is verified now. The watch
// answers when it shows the node verified with the annotations that write
// carried; else the node is read once, and any verified node counts (an
// earlier write that got no answer may be the one that landed). A confirmed
// node is what Settle then watches from, as after Release.
//
// The watch goes on answering while the read is out: on a loaded API server
// the read can wait for its turn (429s, each retried after its Retry-After)
// until ctx ends, while the watch shows the write moments after it lands.
// That is how the SIGTERM after a release with no answer usually comes: its
// label made the DaemonSet controller delete the pod, and the same label is
// on its way to the watch.
func (p *Patcher) Confirm(ctx context.Context, annotations map[string]string) (bool, error) {
	if p.confirmedByWatch(annotations) {
		return true, nil
	}
	v := p.view
	if v == nil || len(annotations) == 0 {
		return p.confirmByRead(p.get(ctx))
	}
	readCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		node *corev1.Node
		err  error
	}
	// The read touches no state of the Patcher's: a read that the watch made
	// needless is let go, ended by its context.
	read := make(chan answer, 1)
	go func() {
		node, err := p.client.CoreV1().Nodes().Get(readCtx, p.node, metav1.GetOptions{})
		read <- answer{node, err}
	}()
	took := false // a change signal, which another taker (Settle) gets again
	defer func() {
		if took {
			signal(v.changed)
		}
	}()
	for {
		select {
		case a := <-read:
			if a.err != nil {
				if p.confirmedByWatch(annotations) {
					return true, nil
				}
				return false, readError{p.classify("get", a.err)}
			}
			p.last = a.node
			return p.confirmByRead(a.node, nil)
		case <-v.changed:
			took = true
			if p.confirmedByWatch(annotations) {
				return true, nil
			}
		case <-ctx.Done():
			return false, readError{p.classify("get", ctx.Err())}
		}
	}
}

// confirmedByWatch reports whether the watch shows the node verified with
// annotations, the ones the release that got no answer carried; then the
// confirmed node is the one the watch shows.
func (p *Patcher) confirmedByWatch(annotations map[string]string) bool {
	node := p.watched()
	if node == nil || len(annotations) == 0 || !p.Verified(node) || !carries(node, annotations) {
		return false
	}
	p.last, p.confirmedRV = node, node.ResourceVersion
	return true
}

// confirmByRead is Confirm's answer from a read of the node.
func (p *Patcher) confirmByRead(node *corev1.Node, err error) (bool, error) {
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
