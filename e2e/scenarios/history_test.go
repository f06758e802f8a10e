package scenarios

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// nodeState is what matters about a node's release at one moment.
type nodeState struct {
	Labelled bool // carries the verified label
	Tainted  bool // carries the startup taint
	// Intact: every foreign taint and label is there.
	Intact bool
}

func (s nodeState) String() string {
	return fmt.Sprintf("{labelled:%v tainted:%v intact:%v}", s.Labelled, s.Tainted, s.Intact)
}

// The states a node passes through when the agent releases it in one write.
var (
	unverified = nodeState{Labelled: false, Tainted: true, Intact: true}
	released   = nodeState{Labelled: true, Tainted: false, Intact: true}
	// unlabelled is a released node after `kubectl label node N node-ready/verified-`.
	unlabelled = nodeState{Labelled: false, Tainted: false, Intact: true}
)

// nodeHistory records, per node, every distinct state seen on a watch of the nodes: a node
// that was ever labelled but still tainted, or untainted but not labelled, shows up here
// even if it was right again a moment later.
type nodeHistory struct {
	mu   sync.Mutex
	seen map[string][]nodeState
}

// watchNodes records the history of the nodes matching selector until the test ends. It
// returns once the first list is recorded, so no later change is missed.
//
// It watches with a plain loop instead of an informer: an informer's reflector backs off for
// up to half a minute after an API server restart, and the releases it would then miss are
// exactly what the restart scenario must see. This loop reconnects within a fraction of a
// second and resumes from the last resource version; only when the API server no longer
// has that version does it list again.
func watchNodes(t *testing.T, client kubernetes.Interface, selector string) *nodeHistory {
	t.Helper()
	h := &nodeHistory{seen: map[string][]nodeState{}}
	nodes := client.CoreV1().Nodes()
	list, err := nodes.List(t.Context(), metav1.ListOptions{LabelSelector: selector})
	require.NoError(t, err)
	for i := range list.Items {
		h.record(&list.Items[i])
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	wg.Go(func() {
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
			rv = h.follow(w, rv)
		}
	})
	return h
}

// reconnectInterval is how soon the node watch tries again after an error.
const reconnectInterval = 100 * time.Millisecond

// follow records the events of one watch until it ends and returns the resource version to
// resume from, or "" to list again.
func (h *nodeHistory) follow(w watch.Interface, rv string) string {
	defer w.Stop()
	for ev := range w.ResultChan() {
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
	return rv
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func (h *nodeHistory) record(n *corev1.Node) {
	s := nodeState{
		Labelled: n.Labels[verifiedLabel] == "true",
		Tainted:  hasTaints(n.Spec.Taints, []corev1.Taint{startupTaint}),
		Intact:   n.Labels[teamLabel] == "infra" && hasTaints(n.Spec.Taints, foreignTaints),
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if states := h.seen[n.Name]; len(states) == 0 || states[len(states)-1] != s {
		h.seen[n.Name] = append(states, s)
	}
}

func (h *nodeHistory) states(node string) []nodeState {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.seen[node])
}

// hasTaints reports whether got holds every taint of want.
func hasTaints(got, want []corev1.Taint) bool {
	for _, w := range want {
		if !slices.ContainsFunc(got, func(g corev1.Taint) bool { return g.MatchTaint(&w) && g.Value == w.Value }) {
			return false
		}
	}
	return true
}
