package harness

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// NodeState is what matters about a node's release at one moment.
type NodeState struct {
	Labelled bool // carries the verified label
	Tainted  bool // carries the startup taint
	// Intact: ForeignLabel and every one of ForeignTaints are there.
	Intact bool
}

func (s NodeState) String() string {
	return fmt.Sprintf("{labelled:%v tainted:%v intact:%v}", s.Labelled, s.Tainted, s.Intact)
}

// The states a node passes through when the agent releases it in one write. Any other
// state, such as labelled but still tainted, is a half-done release.
var (
	Unverified = NodeState{Labelled: false, Tainted: true, Intact: true}
	Released   = NodeState{Labelled: true, Tainted: false, Intact: true}
	// Unlabelled is a released node after `kubectl label node N node-ready/verified-`.
	Unlabelled = NodeState{Labelled: false, Tainted: false, Intact: true}
)

// History records, per node, every distinct state seen on a watch of the nodes: a node that
// was ever labelled but still tainted, or untainted but not labelled, shows up here even if
// it was right again a moment later. Its methods are safe for concurrent use.
type History struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	seen map[string][]NodeState
}

// reconnectInterval is how soon the node watch tries again after an error.
const reconnectInterval = 100 * time.Millisecond

// WatchNodes records the history of the nodes matching the label selector until ctx ends or
// Stop. It returns once the first list is recorded, so no later change is missed.
//
// It watches with a plain loop instead of an informer: an informer's reflector backs off for
// up to half a minute after an API server restart, and the releases it would then miss are
// exactly what a restart test must see. This loop reconnects within a fraction of a second
// and resumes from the last resource version; only when the API server no longer has that
// version does it list again.
func WatchNodes(ctx context.Context, client kubernetes.Interface, selector string) (*History, error) {
	h := &History{seen: map[string][]NodeState{}}
	nodes := client.CoreV1().Nodes()
	list, err := nodes.List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("list nodes %s: %w", selector, err)
	}
	for i := range list.Items {
		h.record(&list.Items[i])
	}

	ctx, h.cancel = context.WithCancel(ctx)
	h.wg.Go(func() {
		rv := list.ResourceVersion
		for ctx.Err() == nil {
			if rv == "" {
				l, err := nodes.List(ctx, metav1.ListOptions{LabelSelector: selector})
				if err != nil {
					sleep(ctx, reconnectInterval)
					continue
				}
				for i := range l.Items {
					h.record(&l.Items[i])
				}
				rv = l.ResourceVersion
			}
			w, err := nodes.Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: rv})
			if err != nil {
				if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
					rv = ""
				}
				sleep(ctx, reconnectInterval)
				continue
			}
			rv = h.follow(ctx, w, rv)
		}
	})
	return h, nil
}

// Stop ends the watch and waits for it. The recorded states stay readable. It is idempotent.
func (h *History) Stop() {
	h.cancel()
	h.wg.Wait()
}

// States returns the distinct states the node went through, oldest first.
func (h *History) States(node string) []NodeState {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.seen[node])
}

// WaitLatest waits until the latest state recorded for the node is want. After an API server
// restart the watch may lag behind the node; a test waits for the final state it expects
// before it compares States.
func (h *History) WaitLatest(ctx context.Context, node string, want NodeState) error {
	err := poll(ctx, func(context.Context) (bool, error) {
		got := h.States(node)
		return len(got) > 0 && got[len(got)-1] == want, nil
	})
	if err != nil {
		return fmt.Errorf("node watch never saw %s in %v; states %v: %w", node, want, h.States(node), err)
	}
	return nil
}

// follow records the events of one watch until it or ctx ends and returns the resource
// version to resume from, or "" to list again.
func (h *History) follow(ctx context.Context, w watch.Interface, rv string) string {
	defer w.Stop()
	for {
		var ev watch.Event
		select {
		case <-ctx.Done():
			return rv
		case e, ok := <-w.ResultChan():
			if !ok {
				return rv
			}
			ev = e
		}
		switch ev.Type {
		case watch.Added, watch.Modified:
			if n, ok := ev.Object.(*corev1.Node); ok {
				h.record(n)
				rv = n.ResourceVersion
			}
		case watch.Bookmark:
			if n, ok := ev.Object.(*corev1.Node); ok {
				rv = n.ResourceVersion
			}
		case watch.Error:
			if status, ok := ev.Object.(*metav1.Status); ok && status.Code == http.StatusGone {
				return ""
			}
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func (h *History) record(n *corev1.Node) {
	s := NodeState{
		Labelled: n.Labels[VerifiedLabel] == "true",
		Tainted:  hasTaints(n.Spec.Taints, []corev1.Taint{StartupTaint}),
		Intact:   n.Labels[ForeignLabel] == ForeignLabelValue && hasTaints(n.Spec.Taints, ForeignTaints),
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if states := h.seen[n.Name]; len(states) == 0 || states[len(states)-1] != s {
		h.seen[n.Name] = append(states, s)
	}
}
