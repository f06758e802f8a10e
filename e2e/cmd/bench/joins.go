package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"time"

	"github.com/nodeready/nodeready/e2e/framework/realnode"
	"github.com/nodeready/nodeready/e2e/framework/stats"
)

// Joins into the running cluster of benchJoins, one after another.
const (
	joinsRunning = 2 // nodes of the cluster before nodeready, CoreDNS on them
	joinsCount   = 5
	// joinsGoal: node Ready to released, p50, with the image pulled from the loopback registry.
	joinsGoal = 2 * time.Second
)

// benchJoins measures the critical path of nodes joining a running cluster of real nodes
// (e2e/framework/realnode with flannel): cluster DNS answers, so nothing is excused, and the
// podnetwork check reaches the CoreDNS pods on the other nodes by pod IP. Linux and root,
// alone on the machine.
func benchJoins(ctx context.Context, o options, logf func(string, ...any)) *section {
	s := &section{Title: fmt.Sprintf("real nodes: %d nodes joining a running cluster", joinsCount)}
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		s.Notes = append(s.Notes, "skipped: real nodes need Linux and root")
		return s
	}
	logDir := o.logDir
	if logDir == "" {
		dir, err := os.MkdirTemp("", "nodeready-bench-joins-")
		if err != nil {
			s.Err = err
			return s
		}
		defer os.RemoveAll(dir)
		logDir = dir
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	c, err := realnode.StartCluster(ctx, realnode.ClusterOptions{AgentBinary: o.agent, LogDir: logDir, Logf: logf,
		Nodes: joinsRunning + joinsCount, JoinedNodes: joinsRunning})
	if err != nil {
		s.Err = err
		return s
	}
	defer func() {
		if err := c.Stop(); err != nil {
			s.Err = errors.Join(s.Err, err)
		}
	}()
	timelines, err := joinNodes(ctx, c, logf)
	if err != nil {
		s.Err = err
		return s
	}
	column := func(f func(realnode.Timeline) time.Duration) []time.Duration {
		var ds []time.Duration
		for _, tl := range timelines {
			ds = append(ds, f(tl))
		}
		return ds
	}
	spread := func(ds []time.Duration) string {
		return fmt.Sprintf("p50 %s (%s … %s)", ms(stats.Percentile(ds, 50)), ms(slices.Min(ds)), ms(slices.Max(ds)))
	}
	for i, step := range timelines[0].Steps() {
		s.add(step.Name, spread(column(func(tl realnode.Timeline) time.Duration { return tl.Steps()[i].Took })))
	}
	toRelease := column(realnode.Timeline.ToRelease)
	p50 := stats.Percentile(toRelease, 50)
	s.goal("node Ready → released", spread(toRelease), "≤ "+ms(joinsGoal)+" p50", p50 <= joinsGoal)
	s.add("node Ready → agent pod gone", spread(column(realnode.Timeline.Total)))
	s.Notes = append(s.Notes,
		fmt.Sprintf("%d real nodes joined one after another a running cluster of %d (CoreDNS on them, nodeready installed as the README says, ENABLE_CONNECTIVITY_MATRIX=true as kube-node-ready's production configuration), each a kubelet, containerd, runc, kube-proxy and flanneld (VXLAN) in namespaces of its own; the agent image pulled from a registry on the host. Each figure is the median over the joins, with the fastest and the slowest.", joinsCount, joinsRunning),
		"Times are when each change reached a watch of the API, and the kubelet's own timestamps of the agent's log lines, as in the first node's table. The Pulled Event reaches a watch late (the kubelet's Event broadcaster), so bound → image pulled is long and image pulled → container started short by as much; their sum is right.")
	return s
}

// joinNodes labels the running nodes verified, installs nodeready with the podnetwork check, and
// starts each other node in turn, returning its timeline once its agent pod is gone.
func joinNodes(ctx context.Context, c *realnode.Cluster, logf func(string, ...any)) ([]realnode.Timeline, error) {
	for i := range joinsRunning {
		if err := c.StartNodeAt(ctx, i); err != nil {
			return nil, err
		}
		if _, err := c.Kubectl(ctx, "label", "node", c.Nodes[i].Name(), "node-ready/verified=true"); err != nil {
			return nil, err
		}
	}
	if err := c.Install(ctx); err != nil {
		return nil, err
	}
	if _, err := c.Kubectl(ctx, "-n", "kube-system", "patch", "configmap", "nodeready-config", "--type=merge",
		`-p={"data":{"ENABLE_CONNECTIVITY_MATRIX":"true"}}`); err != nil {
		return nil, err
	}
	ip, node, err := c.WaitClusterDNS(ctx)
	if err != nil {
		return nil, err
	}
	logf("joins: CoreDNS %s on %s", ip, node)
	var timelines []realnode.Timeline
	for i := joinsRunning; i < len(c.Nodes); i++ {
		rec, err := c.RecordNode(ctx, i)
		if err != nil {
			return nil, err
		}
		if err := c.StartNodeAt(ctx, i); err != nil {
			return nil, err
		}
		tl, err := rec.Wait(ctx)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", c.Nodes[i].Name(), err)
		}
		logf("joins: %s Ready → released %s, → agent pod gone %s", c.Nodes[i].Name(), ms(tl.ToRelease()), ms(tl.Total()))
		timelines = append(timelines, tl)
	}
	return timelines, nil
}
