package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeready/nodeready/e2e/framework/realnode"
)

// realNode runs the demo's last act when the machine allows it (Linux, root, the binaries of
// scripts/build-node.sh): one real node, as users meet nodeready, and the timeline of its
// verification. Otherwise it says in one line that the demo ran simulated nodes only.
func realNode(ctx context.Context, out io.Writer, agent string) error {
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		fmt.Fprintln(out, "Simulated nodes only: a real node (kubelet, containerd, runc) needs Linux and root.")
		return nil
	}
	if _, _, err := realnode.Binaries("", ""); err != nil {
		fmt.Fprintf(out, "Simulated nodes only: %v\n", err)
		return nil
	}
	fmt.Fprintln(out, "\nNow a real node: kubelet v1.36.3, containerd and runc, kube-proxy and CoreDNS, the agent image pulled from a local registry.")
	logDir, err := os.MkdirTemp("", "nodeready-demo-realnode-")
	if err != nil {
		return err
	}
	c, err := realnode.StartCluster(ctx, realnode.ClusterOptions{AgentBinary: agent, LogDir: logDir})
	if err != nil {
		return fmt.Errorf("real node (logs in %s): %w", logDir, err)
	}
	defer func() {
		if err := c.Stop(); err != nil {
			fmt.Fprintf(out, "stopping the real node: %v\n", err)
		}
		os.RemoveAll(logDir)
	}()
	if err := c.Install(ctx); err != nil {
		return err
	}
	rec, err := c.Record(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := c.StartNode(ctx); err != nil {
		return err
	}
	watchCtx, stopWatching := context.WithCancel(ctx)
	go showNode(watchCtx, out, c, start)
	waitCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	tl, err := rec.Wait(waitCtx)
	stopWatching()
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "\nThe real node's path (the first node of a new cluster: CoreDNS cannot run yet, so dns is not")
	fmt.Fprintln(out, "checkable; the agent pod tolerates not-ready, so it can be created before the node is Ready):")
	for _, s := range tl.Steps() {
		fmt.Fprintf(out, "  %-36s %8s\n", s.Name, s.Took.Round(time.Millisecond))
	}
	fmt.Fprintf(out, "  %-36s %8s\n  agent image: %.1f MiB compressed\n", "node Ready → agent pod gone", tl.Total().Round(time.Millisecond), float64(c.Images.AgentSize)/(1<<20))
	return nil
}

// showNode prints the real node's state each time it changes.
func showNode(ctx context.Context, out io.Writer, c *realnode.Cluster, start time.Time) {
	last := ""
	for ctx.Err() == nil {
		state := "registering"
		if n, err := c.CP.Client().CoreV1().Nodes().Get(ctx, c.NodeName, metav1.GetOptions{}); err == nil {
			state = "tainted"
			if n.Labels["node-ready/verified"] == "true" {
				state = "verified"
			}
			pods, err := c.CP.Client().CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=nodeready"})
			if err == nil && len(pods.Items) > 0 {
				p := pods.Items[0]
				state += ", agent pod " + string(p.Status.Phase)
				if p.DeletionTimestamp != nil {
					state += " (terminating)"
				}
				for _, cs := range p.Status.ContainerStatuses {
					if w := cs.State.Waiting; w != nil && w.Reason != "" {
						state += " (" + w.Reason + ")"
					}
				}
			} else if err == nil && state == "verified" {
				state += ", agent gone"
			}
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status != corev1.ConditionTrue {
					state += ", NotReady"
				}
			}
		}
		if state != last {
			fmt.Fprintf(out, "  %6.1fs  %s: %s\n", time.Since(start).Seconds(), c.NodeName, state)
			last = state
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}
