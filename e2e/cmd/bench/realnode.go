package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/nodeready/nodeready/e2e/framework/realnode"
)

// benchRealNode measures the critical path of the first node of a new cluster on a real node
// (e2e/framework/realnode): kubelet, containerd and runc pulling the agent image from a registry,
// kube-proxy and CoreDNS. It needs Linux and root, and runs alone on the machine.
func benchRealNode(ctx context.Context, o options, logf func(string, ...any)) *section {
	s := &section{Title: "real node: a new node's critical path"}
	var tl realnode.Timeline
	var agentSize int64
	withRealCluster(ctx, o, s, "realnode", 10*time.Minute, realnode.ClusterOptions{Logf: logf},
		func(ctx context.Context, c *realnode.Cluster) error {
			if err := c.Install(ctx); err != nil {
				return err
			}
			rec, err := c.Record(ctx)
			if err != nil {
				return err
			}
			if err := c.StartNode(ctx); err != nil {
				return err
			}
			agentSize = c.Images.AgentSize
			tl, err = rec.Wait(ctx)
			return err
		})
	if s.Err != nil || tl.Pod == "" {
		return s
	}
	for _, step := range tl.Steps() {
		s.add(step.Name, ms(step.Took))
	}
	s.add("node Ready → agent pod gone", ms(tl.Total()))
	s.add("agent image, compressed (what a pull transfers)", fmt.Sprintf("%.1f MiB", float64(agentSize)/(1<<20)))
	s.Notes = append(s.Notes,
		"One node, one run: the first node of a new cluster, with the shipped configuration. CoreDNS cannot run before a node is released, so the dns check's query gets no answer; a second after it starts, the EndpointSlices of kube-dns, looked at beside it, show no ready endpoint and the check is reported not checkable (README: Bootstrap). That second is in agent started → released.",
		"Times are when each change reached a watch of the API, and the kubelet's own timestamps of the agent's log lines. node Ready → pod created is positive: the pod does not tolerate the not-ready taint, so the DaemonSet controller creates it once the node is Ready (it is negative with kustomize/components/tolerate-all or the chart's tolerateAll).")
	return s
}

// withRealCluster starts a cluster of real nodes with opts for the section s, runs body on it
// within timeout and stops it, recording any error in s. Its logs go to -logs, else to a
// directory removed afterwards. On a machine that cannot run real nodes, s says so and body
// does not run.
func withRealCluster(ctx context.Context, o options, s *section, name string, timeout time.Duration,
	opts realnode.ClusterOptions, body func(context.Context, *realnode.Cluster) error) {
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		s.Notes = append(s.Notes, "skipped: real nodes need Linux and root")
		return
	}
	opts.LogDir, opts.AgentBinary = o.logDir, o.agent
	if opts.LogDir == "" {
		dir, err := os.MkdirTemp("", "nodeready-bench-"+name+"-")
		if err != nil {
			s.Err = err
			return
		}
		defer os.RemoveAll(dir)
		opts.LogDir = dir
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := realnode.StartCluster(ctx, opts)
	if err != nil {
		s.Err = err
		return
	}
	s.Err = body(ctx, c)
	if err := c.Stop(); err != nil {
		s.Err = errors.Join(s.Err, err)
	}
}
