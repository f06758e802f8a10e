package nodepatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// Settle watches the node for window after Release and releases it again
// whenever the startup taint comes back or the label goes: Karpenter, for
// one, merges its startupTaints into a Node at registration, so a taint
// removed early can reappear seconds later. It returns how many times the
// node had to be released again: releases that wrote, not the watch events
// that showed the node unverified (several can come before one release).
//
// The window is a timer, not a deadline on ctx: a release that has begun
// when the window closes is finished under ctx, so the node is never left
// labelled but tainted. Only the own node is watched (a field selector on
// its name), from the resourceVersion that Release confirmed.
func (p *Patcher) Settle(ctx context.Context, window time.Duration) (int, error) {
	if window <= 0 {
		return 0, nil
	}
	if p.confirmedRV == "" {
		return 0, errors.New("settle: the node was not released yet")
	}
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", p.node).String()
		return p.client.CoreV1().Nodes().Watch(ctx, opts)
	}}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	w, err := watchtools.NewRetryWatcherWithContext(watchCtx, p.confirmedRV, lw)
	if err != nil {
		return 0, fmt.Errorf("watch node %s: %w", p.node, err)
	}
	defer w.Stop()

	timer := time.NewTimer(window)
	defer timer.Stop()
	again := 0
	for {
		select {
		case <-timer.C:
			return again, nil
		case <-ctx.Done():
			return again, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return again, fmt.Errorf("watch node %s: ended", p.node)
			}
			switch ev.Type {
			case watch.Deleted:
				return again, fmt.Errorf("watch node %s: %w", p.node, ErrNodeNotFound)
			case watch.Error:
				continue // the retry watcher re-establishes the watch itself
			}
			node, isNode := ev.Object.(*corev1.Node)
			if !isNode || p.Verified(node) {
				continue
			}
			outcome, err := p.Release(ctx, nil)
			if err != nil {
				return again, err
			}
			if outcome == Patched {
				again++
			}
		}
	}
}
