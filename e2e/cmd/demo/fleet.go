package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/nodeready/nodeready/e2e/framework/harness"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// demoLabels are the labels the demo's autoscaler gives each node besides the fleet's own:
// those of a node that Karpenter launched from the NodePool "default" and has registered.
// The agent releases a node with a NodePool label only once it is registered.
var demoLabels = map[string]string{"karpenter.sh/nodepool": "default", "karpenter.sh/registered": "true"}

// follow adds the nodes and shows their progress until every one is verified and rid of its
// agent, the deadline of one passes, or ctx ends. It returns the nodes' names.
func follow(ctx context.Context, cfg config, out screen, f *harness.Fleet, tr *tracker, settle string, add func(context.Context) error) ([]string, error) {
	info := viewInfo{Nodes: cfg.nodes, Interval: cfg.interval, Settle: settle, Start: time.Now()}
	var v view
	if out.tty {
		v = newTTYView(out, info, out.size)
	} else {
		v = newLineView(out, info)
	}

	addCtx, stopAdding := context.WithCancel(ctx)
	added := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() { added <- add(addCtx) })
	defer func() {
		stopAdding()
		wg.Wait()
	}()

	refresh := time.NewTicker(refreshInterval)
	defer refresh.Stop()
	poll := time.NewTicker(kubeletPollInterval)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			v.Close(time.Now(), tr.Records())
			return nil, ctx.Err()
		case err := <-added:
			if err != nil {
				v.Close(time.Now(), tr.Records())
				return nil, err
			}
		case now := <-poll.C:
			pollKubelet(f.Kubelet(), tr, now)
		case now := <-refresh.C:
			// The kubelet records an agent's exit before it deletes the pod: read it first,
			// so that a pod seen gone has its exit too.
			pollKubelet(f.Kubelet(), tr, now)
			recs := tr.Records()
			if finished(recs, cfg.nodes) {
				v.Close(now, recs)
				return f.Nodes(), nil
			}
			if r, late := overdue(recs, now, cfg.deadline); late {
				v.Close(now, recs)
				if !r.has(verified) {
					return nil, fmt.Errorf("node %s not verified %s after it was created (-deadline); its state: %s", r.Name, cfg.deadline, stateOf(r))
				}
				return nil, fmt.Errorf("agent of node %s still there %s after the node was created (-deadline); its state: %s", r.Name, cfg.deadline, stateOf(r))
			}
			v.Show(now, recs)
		}
	}
}

// addNodes adds n nodes one every interval, the first at once.
func addNodes(ctx context.Context, f *harness.Fleet, tr *tracker, n int, interval time.Duration) error {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", fleetName, i)
	}
	next := time.Now()
	for _, name := range names {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Until(next)):
		}
		next = next.Add(interval)
		tr.Added(name, time.Now())
		if err := f.AddNode(ctx, name, harness.NodeOptions{Labels: maps.Clone(demoLabels)}); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	return nil
}

// introduceNodes says what the nodes will look like when they join.
func introduceNodes(out io.Writer, cfg config) {
	if cfg.karpenter {
		fmt.Fprintf(out, "Creating %d pending pods, one per node: Karpenter launches a node for each. Its Node\n", cfg.nodes)
		fmt.Fprintln(out, "appears with only Karpenter's own taint (CREATED); when Karpenter registers it, it gets")
	} else {
		fmt.Fprintf(out, "Adding %d nodes, one every %s, as an autoscaler would. Each node is born with\n", cfg.nodes, cfg.interval)
	}
	fmt.Fprintf(out, "  the startup taint  %s\n", wellknown.StartupTaintString)
	var taints []string
	for _, t := range harness.ForeignTaints {
		taints = append(taints, t.ToString())
	}
	for _, list := range []struct {
		heading string
		items   []string
	}{{"other taints", taints}, {"labels", labelList()}} {
		for i, item := range list.items {
			if i > 0 {
				list.heading = ""
			}
			fmt.Fprintf(out, "  %-17s  %s\n", list.heading, item)
		}
	}
	fmt.Fprintf(out, "Release: label %s=true added, only the startup taint removed.\n\n", wellknown.VerifiedLabel)
}

// labelList returns the labels every node is born with besides the fleet's own, as k=v.
func labelList() []string {
	labels := map[string]string{harness.ForeignLabel: harness.ForeignLabelValue}
	maps.Copy(labels, demoLabels)
	var s []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		s = append(s, k+"="+labels[k])
	}
	return s
}
