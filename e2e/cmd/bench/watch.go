package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeready/nodeready/e2e/framework/history"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// nodeWatch is when each watched node was first seen and first seen verified, from a
// history of whether it carries the verified label. Only watch events count, as the nodes
// are created after the watch starts: a listed node's time is the list's.
type nodeWatch struct{ rec *history.Recorder[bool] }

// watchNodes watches the nodes matching selector until ctx ends. onLabelled, when set, is
// called once per node when its label is first seen.
func watchNodes(ctx context.Context, client kubernetes.Interface, selector string, onLabelled func(string, time.Time)) (*nodeWatch, error) {
	rec, err := history.Record(ctx, history.Nodes(client, metav1.ListOptions{LabelSelector: selector}),
		func(n *corev1.Node) bool { return n.Labels[wellknown.VerifiedLabel] == "true" })
	if err != nil {
		return nil, err
	}
	if onLabelled != nil {
		called := map[string]bool{} // Follow calls one at a time
		rec.Follow(func(node string, e history.Entry[bool]) {
			if labelledEvent(e) && !called[node] {
				called[node] = true
				onLabelled(node, e.At)
			}
		})
	}
	return &nodeWatch{rec}, nil
}

func watched(e history.Entry[bool]) bool       { return !e.Listed && !e.Deleted }
func labelledEvent(e history.Entry[bool]) bool { return watched(e) && e.State }

// wait returns when the node was first seen verified, waiting for it until ctx ends.
func (nw *nodeWatch) wait(ctx context.Context, node string) (time.Time, error) {
	es, err := nw.rec.Wait(ctx, node, func(es []history.Entry[bool]) bool {
		_, ok := history.First(es, labelledEvent)
		return ok
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("node %s not seen verified: %w", node, err)
	}
	e, _ := history.First(es, labelledEvent)
	return e.At, nil
}

func (nw *nodeWatch) times(node string) (added, labelled time.Time, ok bool) {
	es := nw.rec.Entries(node)
	first, _ := history.First(es, watched)
	l, ok := history.First(es, labelledEvent)
	return first.At, l.At, ok
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
