package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/nodeready/nodeready/e2e/framework/harness"
)

// watchFrom lists to learn the current resource version, then delivers every later event
// to handle with the time it arrived, until ctx ends. The retry watcher resumes after a
// dropped connection without losing events.
func watchFrom(ctx context.Context, list func(context.Context) (string, error),
	w func(context.Context, metav1.ListOptions) (watch.Interface, error), handle func(watch.Event, time.Time)) error {
	rv, err := list(ctx)
	if err != nil {
		return err
	}
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, rv, &cache.ListWatch{WatchFuncWithContext: w})
	if err != nil {
		return err
	}
	go func() {
		defer rw.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-rw.ResultChan():
				if !ok {
					return
				}
				handle(ev, time.Now())
			}
		}
	}()
	return nil
}

// nodeWatch records when each watched node was first seen and first seen verified.
type nodeWatch struct {
	mu       sync.Mutex
	added    map[string]time.Time
	labelled map[string]time.Time
	waiters  map[string]chan struct{}
	// onLabelled, when set, is called once per node when its label is first seen.
	onLabelled func(node string, at time.Time)
}

// watchNodes watches the nodes matching selector until ctx ends.
func watchNodes(ctx context.Context, client kubernetes.Interface, selector string, onLabelled func(string, time.Time)) (*nodeWatch, error) {
	nw := &nodeWatch{added: map[string]time.Time{}, labelled: map[string]time.Time{}, waiters: map[string]chan struct{}{}, onLabelled: onLabelled}
	nodes := client.CoreV1().Nodes()
	err := watchFrom(ctx,
		func(ctx context.Context) (string, error) {
			l, err := nodes.List(ctx, metav1.ListOptions{LabelSelector: selector})
			if err != nil {
				return "", fmt.Errorf("list nodes: %w", err)
			}
			return l.ResourceVersion, nil
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return nodes.Watch(ctx, o)
		},
		nw.handle)
	return nw, err
}

func (nw *nodeWatch) handle(ev watch.Event, at time.Time) {
	n, ok := ev.Object.(*corev1.Node)
	if !ok || ev.Type == watch.Deleted {
		return
	}
	nw.mu.Lock()
	if _, seen := nw.added[n.Name]; !seen {
		nw.added[n.Name] = at
	}
	_, was := nw.labelled[n.Name]
	first := !was && n.Labels[harness.VerifiedLabel] == "true"
	if first {
		nw.labelled[n.Name] = at
		if ch := nw.waiters[n.Name]; ch != nil {
			close(ch)
			delete(nw.waiters, n.Name)
		}
	}
	nw.mu.Unlock()
	if first && nw.onLabelled != nil {
		nw.onLabelled(n.Name, at)
	}
}

// wait returns when the node was first seen verified, waiting for it until ctx ends.
func (nw *nodeWatch) wait(ctx context.Context, node string) (time.Time, error) {
	nw.mu.Lock()
	if at, ok := nw.labelled[node]; ok {
		nw.mu.Unlock()
		return at, nil
	}
	ch := nw.waiters[node]
	if ch == nil {
		ch = make(chan struct{})
		nw.waiters[node] = ch
	}
	nw.mu.Unlock()
	select {
	case <-ch:
		nw.mu.Lock()
		defer nw.mu.Unlock()
		return nw.labelled[node], nil
	case <-ctx.Done():
		return time.Time{}, fmt.Errorf("node %s not seen verified: %w", node, ctx.Err())
	}
}

func (nw *nodeWatch) times(node string) (added, labelled time.Time, ok bool) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	labelled, ok = nw.labelled[node]
	return nw.added[node], labelled, ok
}

func (nw *nodeWatch) count() int {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	return len(nw.labelled)
}

// verifiedEvents returns how many of the nodes have a Verified Event: the one Event an agent
// records when it releases its node.
func verifiedEvents(ctx context.Context, client kubernetes.Interface, nodes []string) (int, error) {
	seen, err := verifiedEventNodes(ctx, client, nodes)
	return len(seen), err
}

// verifiedEventNodes returns which of nodes have a Verified Event.
func verifiedEventNodes(ctx context.Context, client kubernetes.Interface, nodes []string) (map[string]bool, error) {
	list, err := client.EventsV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	want := map[string]bool{}
	for _, n := range nodes {
		want[n] = true
	}
	seen := map[string]bool{}
	for _, e := range list.Items {
		if e.Reason == "Verified" && e.Regarding.Kind == "Node" && want[e.Regarding.Name] {
			seen[e.Regarding.Name] = true
		}
	}
	return seen, nil
}

// verifiedEventsGoal reports how many of total nodes have a Verified Event: every one should.
func (s *section) verifiedEventsGoal(n, total int) {
	s.goal("nodes with a Verified Event", fmt.Sprintf("%d of %d", n, total), "every node", n == total)
}
