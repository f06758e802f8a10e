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
	logDir, done := realNodeLogDir(o, s, "realnode")
	if done == nil {
		return s
	}
	defer done()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	c, err := realnode.StartCluster(ctx, realnode.ClusterOptions{AgentBinary: o.agent, LogDir: logDir, Logf: logf})
	if err != nil {
		s.Err = err
		return s
	}
	defer func() {
		if err := c.Stop(); err != nil {
			s.Err = errors.Join(s.Err, err)
		}
	}()
	if err := c.Install(ctx); err != nil {
		s.Err = err
		return s
	}
	rec, err := c.Record(ctx)
	if err != nil {
		s.Err = err
		return s
	}
	if err := c.StartNode(ctx); err != nil {
		s.Err = err
		return s
	}
	tl, err := rec.Wait(ctx)
	if err != nil {
		s.Err = err
		return s
	}
	for _, step := range tl.Steps() {
		s.add(step.Name, ms(step.Took))
	}
	s.add("node Ready → agent pod gone", ms(tl.Total()))
	s.add("agent image, compressed (what a pull transfers)", fmt.Sprintf("%.1f MiB", float64(c.Images.AgentSize)/(1<<20)))
	s.Notes = append(s.Notes,
		"One node, one run: the first node of a new cluster, with the shipped configuration. CoreDNS cannot run before a node is released, so the dns check's query gets no answer; a second after it starts, the EndpointSlices of kube-dns, looked at beside it, show no ready endpoint and the check is reported not checkable (README: Bootstrap). That second is in agent started → released.",
		"Times are when each change reached a watch of the API, and the kubelet's own timestamps of the agent's log lines. node Ready → pod created is negative when the DaemonSet controller creates the agent pod before the node is Ready: the pod tolerates every taint, not-ready included.")
	return s
}

// realNodeLogDir is where a real-node benchmark keeps its logs: -logs, else a directory that
// done removes. On a machine that cannot run real nodes, or when the directory cannot be made,
// it says so in s and done is nil.
func realNodeLogDir(o options, s *section, name string) (dir string, done func()) {
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		s.Notes = append(s.Notes, "skipped: real nodes need Linux and root")
		return "", nil
	}
	if o.logDir != "" {
		return o.logDir, func() {}
	}
	dir, err := os.MkdirTemp("", "nodeready-bench-"+name+"-")
	if err != nil {
		s.Err = err
		return "", nil
	}
	return dir, func() { os.RemoveAll(dir) }
}
