package nodepatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Settle watches the node for window after Release and releases it again
// whenever the startup taint comes back or the label goes: Karpenter, for
// one, merges its startupTaints into a Node when it registers it, again if
// it has to retry the registration, so a taint removed then can reappear a
// second later. It returns how many times the node had to be released
// again: releases that wrote, not the watch events that showed the node
// unverified (several can come before one release).
//
// It uses the watch that Watch started, which has followed the node since
// the checks began, or starts one. The window is a timer, not a deadline on
// ctx: a release that has begun when the window closes is finished under
// ctx, so the node is never left labelled but tainted. A watch that ends
// early (410 Gone, an outage) is not a gap: the informer lists and watches
// again and shows whatever changed meanwhile; if it is still down when the
// window closes, the node is read once more and released again if need be.
func (p *Patcher) Settle(ctx context.Context, window time.Duration) (int, error) {
	if window <= 0 {
		return 0, nil
	}
	if p.confirmedRV == "" {
		return 0, errors.New("settle: the node was not released yet")
	}
	// seen: the watch has shown the node as Release confirmed it, or the
	// informer has listed it anew since (then it may skip that version).
	// Before that the watch shows older versions of the node, still tainted.
	started := p.view == nil
	if started {
		defer p.Watch(ctx)()
	}
	v := p.view
	restarts := v.restarts.Load()
	if started {
		restarts = 0
	}
	seen := false
	timer := time.NewTimer(window)
	defer timer.Stop()
	again := 0
	release := func() error {
		outcome, err := p.release(ctx, p.value, nil, nil)
		if outcome == Patched {
			again++
			seen, restarts = false, v.restarts.Load()
		}
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return again, ctx.Err()
		case <-timer.C:
			if v.live.Load() {
				return again, nil
			}
			return again, release()
		case <-v.changed:
			if !isDone(v.synced) {
				continue // the informer signals again once it is synced
			}
			obj, exists, err := v.store.GetByKey(p.node)
			switch {
			case err != nil:
				return again, fmt.Errorf("watch node %s: %w", p.node, err)
			case !exists:
				return again, fmt.Errorf("watch node %s: %w", p.node, ErrNodeNotFound)
			}
			node, ok := obj.(*corev1.Node)
			if !ok {
				continue
			}
			seen = seen || v.hasShown(p.confirmedRV) || v.restarts.Load() > restarts
			if !seen || p.Verified(node) {
				continue
			}
			if err := release(); err != nil {
				return again, err
			}
		}
	}
}
