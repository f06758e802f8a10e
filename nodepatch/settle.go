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
// its name), from the resourceVersion that Release confirmed. A watch that
// ends early (410 Gone after a long outage) is not a gap: the node is read
// and released again if need be, and watched anew from that read.
func (p *Patcher) Settle(ctx context.Context, window time.Duration) (int, error) {
	if window <= 0 {
		return 0, nil
	}
	if p.confirmedRV == "" {
		return 0, errors.New("settle: the node was not released yet")
	}
	timer := time.NewTimer(window)
	defer timer.Stop()
	again := 0
	release := func() error {
		outcome, err := p.Release(ctx, nil)
		if outcome == Patched {
			again++
		}
		return err
	}
	for {
		ended, err := p.watch(ctx, timer.C, release)
		if err != nil || !ended {
			return again, err
		}
		// A short pause, so a watch that keeps ending is no busy loop; then a
		// read that re-confirms the node, so the next watch starts from now.
		closed := false
		select {
		case <-ctx.Done():
			return again, ctx.Err()
		case <-timer.C:
			closed = true
		case <-time.After(rewatchPause):
		}
		if err := release(); err != nil || closed {
			return again, err
		}
	}
}

// rewatchPause is the wait before reading and watching the node again after
// its watch ended early.
const rewatchPause = 200 * time.Millisecond

// watch watches the node from the confirmed resourceVersion and calls
// release whenever it is not verified, until done fires (ended false) or the
// watch ends on its own (ended true).
func (p *Patcher) watch(ctx context.Context, done <-chan time.Time, release func() error) (ended bool, err error) {
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", p.node).String()
		return p.client.CoreV1().Nodes().Watch(ctx, opts)
	}}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	w, err := watchtools.NewRetryWatcherWithContext(watchCtx, p.confirmedRV, lw)
	if err != nil {
		return false, fmt.Errorf("watch node %s: %w", p.node, err)
	}
	defer w.Stop()
	for {
		select {
		case <-done:
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return true, nil
			}
			switch ev.Type {
			case watch.Deleted:
				return false, fmt.Errorf("watch node %s: %w", p.node, ErrNodeNotFound)
			case watch.Error:
				continue // the retry watcher re-establishes the watch itself, or ends
			}
			node, isNode := ev.Object.(*corev1.Node)
			if !isNode || p.Verified(node) {
				continue
			}
			if err := release(); err != nil {
				return false, err
			}
		}
	}
}
