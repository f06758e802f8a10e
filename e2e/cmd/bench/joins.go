package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
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
//
// kubeletConfig, when set, is added to every kubelet's configuration: a setting users may
// choose, measured beside the default.
func benchJoins(ctx context.Context, o options, logf func(string, ...any), kubeletConfig string) *section {
	s := &section{Title: fmt.Sprintf("real nodes: %d nodes joining a running cluster", joinsCount)}
	if kubeletConfig != "" {
		s.Title += ", kubelet with " + strings.TrimSpace(kubeletConfig)
	}
	var timelines []realnode.Timeline
	var starts []realnode.PodStart
	withRealCluster(ctx, o, s, "joins", 15*time.Minute, realnode.ClusterOptions{Logf: logf,
		Nodes: joinsRunning + joinsCount, JoinedNodes: joinsRunning, KubeletConfig: kubeletConfig},
		func(ctx context.Context, c *realnode.Cluster) (err error) {
			timelines, starts, err = joinNodes(ctx, c, logf)
			return err
		})
	if s.Err != nil || len(timelines) == 0 {
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
	// The same start as the kubelet and containerd logged it.
	logged := func(f func(realnode.PodStart, realnode.Timeline) time.Duration) string {
		var ds []time.Duration
		for i, ps := range starts {
			ds = append(ds, f(ps, timelines[i]))
		}
		return spread(ds)
	}
	s.add("kubelet: node Ready → token volume mounted", logged(func(p realnode.PodStart, tl realnode.Timeline) time.Duration { return p.Mounted.Sub(tl.NodeReady) }))
	s.add("kubelet: volume mounted → sandbox asked", logged(func(p realnode.PodStart, _ realnode.Timeline) time.Duration { return p.SandboxStart.Sub(p.Mounted) }))
	s.add("containerd: sandbox (pause, CNI)", logged(func(p realnode.PodStart, _ realnode.Timeline) time.Duration {
		return p.SandboxReady.Sub(p.SandboxStart)
	}))
	s.add("containerd: image pull", logged(func(p realnode.PodStart, _ realnode.Timeline) time.Duration { return p.Pulled.Sub(p.PullStart) }))
	s.add("containerd: pulled → container started", logged(func(p realnode.PodStart, _ realnode.Timeline) time.Duration { return p.Started.Sub(p.Pulled) }))
	s.add("container started → released (agent log)", logged(func(p realnode.PodStart, tl realnode.Timeline) time.Duration { return tl.Released.Sub(p.Started) }))
	failedFirst := 0
	for _, p := range starts {
		if !p.MountFailed.IsZero() {
			failedFirst++
		}
	}
	s.add("token volume's first mount failed (\"kube-root-ca.crt\" not registered)", fmt.Sprintf("%d of %d pods", failedFirst, len(starts)))
	if kubeletConfig != "" {
		s.Notes = append(s.Notes, "The same joins with one kubelet setting changed: configMapAndSecretChangeDetectionStrategy: Get makes the kubelet read a pod's ConfigMaps and Secrets from the API server when it mounts them, instead of from a watch it registers the pod with, so the token volume no longer waits for the network (its first mount succeeds). What is left is the kubelet's pod worker retrying a sync that failed while the network was not ready about a second later (volume mounted → sandbox asked). Get costs API requests for every mount on every node: a choice for the cluster's operator, measured here, not a recommendation.")
		return s
	}
	s.Notes = append(s.Notes,
		fmt.Sprintf("%d real nodes joined one after another a running cluster of %d (CoreDNS on them, nodeready installed as the README says, ENABLE_CONNECTIVITY_MATRIX=true as kube-node-ready's production configuration), each a kubelet, containerd, runc, kube-proxy and flanneld (VXLAN) in namespaces of its own; the agent image pulled from a registry on the host. Each figure is the median over the joins, with the fastest and the slowest.", joinsCount, joinsRunning),
		"Times are when each change reached a watch of the API, and the kubelet's own timestamps of the agent's log lines, as in the first node's table. The Pulled Event reaches a watch late (the kubelet's Event broadcaster), so the rows marked kubelet: and containerd: split the same start as those two logged it.",
		"Where the time goes: the DaemonSet controller creates the agent pod when the node registers (the pod tolerates every taint, not-ready included), before the node's CNI is ready. While the network is not ready the kubelet does not sync the pod far enough to register its ConfigMaps, so the first mounts of its token volume fail with \"kube-root-ca.crt\" not registered, and the volume manager retries with its exponential backoff (0.5 s, 1 s, 2 s, ...): node Ready → token volume mounted is that wait (kubernetes/kubernetes#105204 is the message's issue). From the mount on, sandbox, pull, container start and the agent's checks and release take the rest. So the goal is missed by the kubelet's retry, not by nodeready; on a cluster whose CNI takes longer to become ready the wait grows with it (the backoff doubles), and no setting of the agent's pod that keeps it in the pod network avoids it: its API client needs the cluster's CA, which the kubelet mounts from the kube-root-ca.crt ConfigMap (a host-network pod would not wait, but would no longer check the pod network from a pod).")
	return s
}

// joinNodes labels the running nodes verified, installs nodeready with the podnetwork check, and
// starts each other node in turn, returning its timeline once its agent pod is gone, and the
// start of that pod as its kubelet and containerd logged it.
func joinNodes(ctx context.Context, c *realnode.Cluster, logf func(string, ...any)) ([]realnode.Timeline, []realnode.PodStart, error) {
	for i := range joinsRunning {
		if err := c.StartNodeAt(ctx, i); err != nil {
			return nil, nil, err
		}
		if _, err := c.Kubectl(ctx, "label", "node", c.Nodes[i].Name(), "node-ready/verified=true"); err != nil {
			return nil, nil, err
		}
	}
	if err := c.Install(ctx); err != nil {
		return nil, nil, err
	}
	if _, err := c.Kubectl(ctx, "-n", "kube-system", "patch", "configmap", "nodeready-config", "--type=merge",
		`-p={"data":{"ENABLE_CONNECTIVITY_MATRIX":"true"}}`); err != nil {
		return nil, nil, err
	}
	ip, node, err := c.WaitClusterDNS(ctx)
	if err != nil {
		return nil, nil, err
	}
	logf("joins: CoreDNS %s on %s", ip, node)
	var (
		timelines []realnode.Timeline
		starts    []realnode.PodStart
	)
	for i := joinsRunning; i < len(c.Nodes); i++ {
		rec, err := c.RecordNode(ctx, i)
		if err != nil {
			return nil, nil, err
		}
		if err := c.StartNodeAt(ctx, i); err != nil {
			return nil, nil, err
		}
		tl, err := rec.Wait(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("node %s: %w", c.Nodes[i].Name(), err)
		}
		ps, err := c.Nodes[i].PodStart(tl.Pod)
		if err != nil {
			return nil, nil, err
		}
		logf("joins: %s Ready → released %s, → agent pod gone %s", c.Nodes[i].Name(), ms(tl.ToRelease()), ms(tl.Total()))
		timelines, starts = append(timelines, tl), append(starts, ps)
	}
	return timelines, starts, nil
}
