package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeready/nodeready/e2e/framework/realnode"
)

// The real nodes' act: a running cluster of realRunning nodes, then two nodes joining it.
const (
	realRunning = 2
	realJoining = 2
	// vxlanPort is flannel's VXLAN port: dropping it breaks a node's pod network while the
	// node is Ready and flanneld runs.
	vxlanPort = "8472"
)

// realNodesSupported says why the machine cannot run real nodes, or "".
func realNodesSupported() string {
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		return "real nodes (kubelet, containerd, runc) need Linux and root"
	}
	return ""
}

// realNodes runs the demo's last act once the node components are built: real nodes joining a
// running cluster, networked by flannel, with the podnetwork check on. The first joins and is
// released; the second joins with its VXLAN traffic dropped, is held with the pod it cannot
// reach named, and is released once the traffic flows again, without a restart.
func realNodes(ctx context.Context, out io.Writer, agent, plugin string, build *scriptBuild) error {
	if why := realNodesSupported(); why != "" {
		fmt.Fprintf(out, "Simulated nodes only: %s.\n", why)
		return nil
	}
	fmt.Fprintln(out, "\nBuilding what real nodes run (kubelet, kube-proxy, containerd, CoreDNS, flanneld; minutes only the first time):")
	if err := build.wait(ctx, out); err != nil {
		return err
	}
	if _, _, err := realnode.Binaries("", ""); err != nil {
		fmt.Fprintf(out, "Simulated nodes only: %v\n", err)
		return nil
	}
	fmt.Fprintf(out, "\nNow real nodes: a running cluster of %d, kubelet v1.36.3, containerd, runc, kube-proxy, flanneld (VXLAN)\n", realRunning)
	fmt.Fprintln(out, "and CoreDNS, the agent image pulled from a local registry; ENABLE_CONNECTIVITY_MATRIX=true, and rounds")
	fmt.Fprintln(out, "of checks every 2s, a failure recorded after two.")
	logDir, err := os.MkdirTemp("", "nodeready-demo-realnodes-")
	if err != nil {
		return err
	}
	c, err := realnode.StartCluster(ctx, realnode.ClusterOptions{AgentBinary: agent, LogDir: logDir,
		Nodes: realRunning + realJoining, JoinedNodes: realRunning})
	if err != nil {
		return fmt.Errorf("real nodes (logs in %s): %w", logDir, err)
	}
	failed := true
	defer func() {
		if err := c.Stop(); err != nil {
			fmt.Fprintf(out, "stopping the real nodes: %v\n", err)
		}
		if failed {
			fmt.Fprintf(out, "Real nodes' logs kept in %s\n", logDir)
			return
		}
		os.RemoveAll(logDir)
	}()
	if err := startRunning(ctx, c); err != nil {
		return err
	}
	dnsIP, dnsNode, err := c.WaitClusterDNS(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Cluster running: %s and %s, CoreDNS %s on %s.\n", c.Nodes[0].Name(), c.Nodes[1].Name(), dnsIP, dnsNode)

	joining := c.Nodes[realRunning]
	fmt.Fprintf(out, "\n%s joins:\n", joining.Name())
	if err := joinAndWatch(ctx, out, c, realRunning, nil); err != nil {
		return err
	}

	broken := c.Nodes[realRunning+1]
	drop := []string{"OUTPUT", "-o", "eth0", "-p", "udp", "--dport", vxlanPort, "-j", "DROP"}
	fmt.Fprintf(out, "\n%s joins with its VXLAN traffic dropped (iptables in its namespace): Ready, flanneld running,\n", broken.Name())
	fmt.Fprintln(out, "but no pod on another node reachable:")
	if err := broken.InNetns(append([]string{"iptables", "-I"}, drop...)...); err != nil {
		return err
	}
	repair := func() error {
		fmt.Fprintf(out, "  Repairing: the VXLAN traffic flows again; the agent's next round releases %s.\n", broken.Name())
		return broken.InNetns(append([]string{"iptables", "-D"}, drop...)...)
	}
	if err := joinAndWatch(ctx, out, c, realRunning+1, repair); err != nil {
		return err
	}
	if err := showStatus(ctx, out, plugin, c.CP.Kubeconfig()); err != nil {
		return err
	}
	failed = false
	return nil
}

// startRunning starts the cluster's running nodes, labels them verified (nodes of the cluster
// before nodeready) and installs nodeready as the README says, with the podnetwork check on and
// short rounds (checks of 3 s, a failure recorded after two rounds, rounds every 2 s), so a
// held node says why within seconds and is released soon after its repair.
func startRunning(ctx context.Context, c *realnode.Cluster) error {
	for i := range realRunning {
		if err := c.StartNodeAt(ctx, i); err != nil {
			return err
		}
		if _, err := c.Kubectl(ctx, "label", "node", c.Nodes[i].Name(), "node-ready/verified=true"); err != nil {
			return err
		}
	}
	if err := c.Install(ctx); err != nil {
		return err
	}
	_, err := c.Kubectl(ctx, "-n", "kube-system", "patch", "configmap", "nodeready-config", "--type=merge",
		`-p={"data":{"ENABLE_CONNECTIVITY_MATRIX":"true","CHECK_TIMEOUT":"3s","MAX_RETRIES":"2",`+
			`"RETRY_BACKOFF":"constant","RETRY_BACKOFF_BASE":"2s","RETRY_BACKOFF_MAX":"2s"}}`)
	return err
}

// joinAndWatch starts node i and shows its state until it is released and its agent pod is
// gone. repair, when not nil, runs once the node is held (its CheckFailed Events say why).
func joinAndWatch(ctx context.Context, out io.Writer, c *realnode.Cluster, i int, repair func() error) error {
	rec, err := c.RecordNode(ctx, i)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := c.StartNodeAt(ctx, i); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	watchCtx, stopWatching := context.WithCancel(ctx)
	held := make(chan string, 1)
	go showNode(watchCtx, out, c, c.Nodes[i].Name(), start, held)
	var repaired time.Time
	if repair != nil {
		select {
		case why := <-held:
			fmt.Fprintf(out, "  Held, CheckFailed:\n        %s\n", why)
		case <-ctx.Done():
			stopWatching()
			return fmt.Errorf("%s was never held: %w", c.Nodes[i].Name(), ctx.Err())
		}
		if err := repair(); err != nil {
			stopWatching()
			return err
		}
		repaired = time.Now()
	}
	tl, err := rec.Wait(ctx)
	stopWatching()
	if err != nil {
		return err
	}
	if !repaired.IsZero() {
		fmt.Fprintf(out, "  Held %s from node Ready; repair → released %s, with no pod restarted.\n",
			repaired.Sub(tl.NodeReady).Round(100*time.Millisecond), tl.Released.Sub(repaired).Round(10*time.Millisecond))
		return nil
	}
	fmt.Fprintln(out, "  Its path:")
	for _, s := range tl.Steps() {
		fmt.Fprintf(out, "    %-36s %8s\n", s.Name, s.Took.Round(time.Millisecond))
	}
	fmt.Fprintf(out, "    %-36s %8s\n    %-36s %8s\n", "node Ready → released", tl.ToRelease().Round(time.Millisecond),
		"node Ready → agent pod gone", tl.Total().Round(time.Millisecond))
	showPodStart(out, c.Nodes[i], tl)
	return nil
}

// showPodStart prints how the node's kubelet and containerd started the agent pod: its token
// volume (the token alone) mounts as soon as the pod is there, before the node is Ready, and
// the sandbox waits for the kubelet's retry of the sync that failed while the network was not.
func showPodStart(out io.Writer, n *realnode.Node, tl realnode.Timeline) {
	ps, err := n.PodStart(tl.Pod)
	if err != nil {
		fmt.Fprintf(out, "  (its kubelet's and containerd's logs: %v)\n", err)
		return
	}
	fmt.Fprintln(out, "  As its kubelet and containerd logged it:")
	for _, r := range []struct {
		name string
		took time.Duration
	}{
		{"pod added → token volume mounted", ps.Mounted.Sub(ps.Added)},
		{"node Ready → sandbox asked", ps.SandboxStart.Sub(tl.NodeReady)},
		{"sandbox (pause, CNI)", ps.SandboxReady.Sub(ps.SandboxStart)},
		{"image pull", ps.Pulled.Sub(ps.PullStart)},
		{"pulled → container started", ps.Started.Sub(ps.Pulled)},
		{"container started → released", tl.Released.Sub(ps.Started)},
	} {
		fmt.Fprintf(out, "    %-36s %8s\n", r.name, r.took.Round(time.Millisecond))
	}
	if !ps.MountFailed.IsZero() {
		fmt.Fprintln(out, "    (its token volume's first mount failed: \"kube-root-ca.crt\" not registered)")
	}
}

// showNode prints the node's state each time it changes; once the agent reported failing
// checks (CheckFailed Events), their notes go to held.
func showNode(ctx context.Context, out io.Writer, c *realnode.Cluster, name string, start time.Time, held chan<- string) {
	last := ""
	for ctx.Err() == nil {
		state := "registering"
		if n, err := c.CP.Client().CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err == nil {
			state = nodeState(ctx, c, n, held)
		}
		if state != last {
			fmt.Fprintf(out, "  %6.1fs  %s: %s\n", time.Since(start).Seconds(), name, state)
			last = state
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func nodeState(ctx context.Context, c *realnode.Cluster, n *corev1.Node, held chan<- string) string {
	var parts []string
	if n.Labels["node-ready/verified"] == "true" {
		parts = append(parts, "verified")
	} else {
		parts = append(parts, "tainted")
	}
	for _, cond := range n.Status.Conditions {
		switch {
		case cond.Type == corev1.NodeReady && cond.Status != corev1.ConditionTrue:
			parts = append(parts, "NotReady")
		case cond.Type == "node-ready/Verified" && cond.Status == corev1.ConditionFalse:
			parts = append(parts, "condition "+cond.Reason)
		}
	}
	// A round of checks with problems says so in a CheckFailed Event per failing check.
	events, err := c.CP.Client().CoreV1().Events("").List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + n.Name + ",reason=CheckFailed"})
	if err == nil && len(events.Items) > 0 && parts[0] == "tainted" {
		parts = append(parts, fmt.Sprintf("held (%d CheckFailed)", len(events.Items)))
		var notes []string
		for _, e := range events.Items {
			notes = append(notes, e.Message)
		}
		select {
		case held <- strings.Join(notes, "\n        "):
		default:
		}
	}
	pods, err := c.CP.Client().CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/name=nodeready", FieldSelector: "spec.nodeName=" + n.Name})
	switch {
	case err == nil && len(pods.Items) > 0:
		p := pods.Items[0]
		agent := "agent pod " + string(p.Status.Phase)
		if p.DeletionTimestamp != nil {
			agent += " (terminating)"
		}
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && w.Reason != "" {
				agent += " (" + w.Reason + ")"
			}
		}
		parts = append(parts, agent)
	case err == nil && parts[0] == "verified":
		parts = append(parts, "agent gone")
	}
	return strings.Join(parts, ", ")
}
