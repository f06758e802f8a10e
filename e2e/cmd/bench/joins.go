package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeready/nodeready/e2e/framework/harness"
	"github.com/nodeready/nodeready/e2e/framework/realnode"
	"github.com/nodeready/nodeready/e2e/framework/stats"
)

// Joins into the running cluster of benchJoins, one after another.
const (
	joinsRunning = 2 // nodes of the cluster before nodeready, CoreDNS on them
	joinsCount   = 5
	// joinsForeign nodes join first with foreignTaint beside the startup taint, as a
	// dedicated pool's nodes do: the DaemonSet as shipped does not tolerate it.
	joinsForeign = 1
	foreignTaint = "dedicated=gpu:NoSchedule"
	// foreignWait: how long a foreign node is watched for an agent once it is Ready.
	foreignWait = 10 * time.Second
	// joinsGoal: node Ready to released, p50, with the image pulled from the loopback registry.
	joinsGoal = 2 * time.Second
)

// benchJoins measures the critical path of nodes joining a running cluster of real nodes
// (e2e/framework/realnode with flannel): cluster DNS answers, so nothing is excused, and the
// podnetwork check reaches the CoreDNS pods on the other nodes by pod IP. Linux and root,
// alone on the machine.
//
// tolerations, when set, replace the DaemonSet's after the install: a design measured beside
// the shipped one.
func benchJoins(ctx context.Context, o options, logf func(string, ...any), tolerations []corev1.Toleration, checks *joinsChecks) *section {
	s := &section{Title: fmt.Sprintf("real nodes: %d nodes joining a running cluster", joinsCount)}
	if checks != nil {
		s.Title += ", " + checks.title
	}
	if tolerations != nil {
		s.Title += ", the agent pod tolerating every taint (kustomize/components/tolerate-all, tolerateAll)"
	}
	var timelines []realnode.Timeline
	var starts []realnode.PodStart
	var foreign []foreignNode
	withRealCluster(ctx, o, s, "joins", 15*time.Minute, realnode.ClusterOptions{Logf: logf,
		Nodes: joinsRunning + joinsForeign + joinsCount, JoinedNodes: joinsRunning},
		func(ctx context.Context, c *realnode.Cluster) (err error) {
			timelines, starts, foreign, err = joinNodes(ctx, c, o.repo, logf, tolerations, checks)
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
	s.add("kubelet: node Ready → sandbox asked", logged(func(p realnode.PodStart, tl realnode.Timeline) time.Duration { return p.SandboxStart.Sub(tl.NodeReady) }))
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
	for _, f := range foreign {
		s.add("node with "+foreignTaint+": agent pods bound, "+ms(foreignWait)+" after Ready", fmt.Sprintf("%d", f.agents))
		s.add("node with "+foreignTaint+": kubectl nodeready status", f.status)
	}
	if tolerations != nil {
		s.Notes = append(s.Notes, "The same joins with the DaemonSet's tolerations replaced by `operator: Exists`, as "+
			"kustomize/components/tolerate-all and the chart's tolerateAll install it. The pod tolerates "+
			"node.kubernetes.io/not-ready:NoSchedule too, so the DaemonSet controller creates it when the node registers "+
			"(node Ready → pod created is negative), before the node's CNI is ready; the kubelet's first sync of it fails "+
			"with \"network is not ready\" and is retried 1 to 1.5 s later. The node with "+foreignTaint+" gets an agent "+
			"and is verified like the others (its agent pod is gone by the time the row above counts them).")
	}
	s.Notes = append(s.Notes,
		fmt.Sprintf("%d real nodes joined one after another a running cluster of %d (CoreDNS on them, nodeready installed as the README says, ENABLE_CONNECTIVITY_MATRIX=true as kube-node-ready's production configuration), each a kubelet, containerd, runc, kube-proxy and flanneld (VXLAN) in namespaces of its own; the agent image pulled from a registry on the host. Each figure is the median over the joins, with the fastest and the slowest.", joinsCount, joinsRunning),
		"Times are when each change reached a watch of the API, and the kubelet's own timestamps of the agent's log lines, as in the first node's table. The Pulled Event reaches a watch late (the kubelet's Event broadcaster), so the rows marked kubelet: and containerd: split the same start as those two logged it.")
	if tolerations != nil {
		s.Notes = append(s.Notes, "Where the time goes when the pod tolerates every taint: its token volume holds the token alone (the CA comes in KUBE_ROOT_CA_CRT, read when the container starts), so it mounts before the node is Ready; the automatic kube-api-access volume, with the kube-root-ca.crt ConfigMap in it, could mount only after the kubelet registered the pod's ConfigMaps, once the network is ready, and its volume manager retried it 0.5 s, 1 s, 2 s ... later. What is left before the sandbox is the kubelet's pod worker: it retries a sync that failed on the network 1 to 1.5 s later (backOffOnTransientErrorPeriod, jittered, in kubelet/pod_workers.go), on the next tick of its 1 s sync loop, so node Ready → sandbox asked is up to 2.5 s, whenever the network turns ready in that cycle.")
		return s
	}
	s.Notes = append(s.Notes, "The DaemonSet as shipped lists its tolerations: the startup taint and every NoExecute taint, not "+
		"node.kubernetes.io/not-ready:NoSchedule, which the API server puts on every new node (admission plugin "+
		"TaintNodesByCondition) and the node lifecycle controller removes once the node is Ready. So the DaemonSet "+
		"controller creates the agent pod only then (node Ready → pod created is positive), the kubelet's first sync of it "+
		"succeeds, and nothing waits for a retry. A node with a NoSchedule taint the list does not name gets no agent: "+
		fmt.Sprintf("%d node joined first with %s beside the startup taint, ", joinsForeign, foreignTaint)+
		"and the rows above say how many agent pods were bound to it "+ms(foreignWait)+" after it was Ready and what "+
		"`kubectl nodeready status` said of it; the alert NodeReadyHeldWithoutAgent fires on such a node "+
		"(e2e/static/alerts, a promtool test on the series kube-state-metrics exports for it).")
	return s
}

// joinNodes labels the running nodes verified, installs nodeready with the podnetwork check, and
// starts each other node in turn, returning its timeline once its agent pod is gone, and the
// start of that pod as its kubelet and containerd logged it.
func joinNodes(ctx context.Context, c *realnode.Cluster, repo string, logf func(string, ...any), tolerations []corev1.Toleration, checks *joinsChecks) ([]realnode.Timeline, []realnode.PodStart, []foreignNode, error) {
	for i := range joinsRunning {
		if err := c.StartNodeAt(ctx, i); err != nil {
			return nil, nil, nil, err
		}
		if _, err := c.Kubectl(ctx, "label", "node", c.Nodes[i].Name(), "node-ready/verified=true"); err != nil {
			return nil, nil, nil, err
		}
		if checks != nil && checks.kubeRouter {
			if err := c.Nodes[i].StartKubeRouter(ctx, c.CP); err != nil {
				return nil, nil, nil, err
			}
		}
	}
	if err := c.Install(ctx); err != nil {
		return nil, nil, nil, err
	}
	if _, err := c.Kubectl(ctx, "-n", "kube-system", "patch", "configmap", "nodeready-config", "--type=merge",
		`-p={"data":{"ENABLE_CONNECTIVITY_MATRIX":"true"}}`); err != nil {
		return nil, nil, nil, err
	}
	if checks != nil {
		if checks.kubeRouter {
			if _, err := c.Kubectl(ctx, "apply", "-f", filepath.Join(repo, "manifests", "networkpolicy", "canary.yaml")); err != nil {
				return nil, nil, nil, err
			}
		}
		if _, err := c.Kubectl(ctx, "-n", "kube-system", "patch", "configmap", "nodeready-config", "--type=merge",
			`-p={"data":{"CHECKS":"`+checks.checks+`"}}`); err != nil {
			return nil, nil, nil, err
		}
	}
	if tolerations != nil {
		patch, err := json.Marshal([]map[string]any{{"op": "replace", "path": "/spec/template/spec/tolerations", "value": tolerations}})
		if err != nil {
			return nil, nil, nil, err
		}
		if _, err := c.Kubectl(ctx, "-n", "kube-system", "patch", "daemonset/nodeready", "--type=json", "-p="+string(patch)); err != nil {
			return nil, nil, nil, err
		}
	}
	ip, node, err := c.WaitClusterDNS(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	logf("joins: CoreDNS %s on %s", ip, node)
	var (
		timelines []realnode.Timeline
		starts    []realnode.PodStart
		foreign   []foreignNode
	)
	for i := joinsRunning; i < joinsRunning+joinsForeign; i++ {
		f, err := joinForeign(ctx, c, repo, i)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("node %s: %w", c.Nodes[i].Name(), err)
		}
		logf("joins: %s with %s: %d agent pods, status %s", c.Nodes[i].Name(), foreignTaint, f.agents, f.status)
		foreign = append(foreign, f)
	}
	for i := joinsRunning + joinsForeign; i < len(c.Nodes); i++ {
		rec, err := c.RecordNode(ctx, i)
		if err != nil {
			return nil, nil, nil, err
		}
		if err := c.StartNodeAt(ctx, i); err != nil {
			return nil, nil, nil, err
		}
		// The policy agent starts with the node's other daemons, as a DaemonSet's pod would:
		// the agent's first probe may come before it enforces, and the retry is the cost.
		if checks != nil && checks.kubeRouter {
			if err := c.Nodes[i].StartKubeRouter(ctx, c.CP); err != nil {
				return nil, nil, nil, err
			}
		}
		tl, err := rec.Wait(ctx)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("node %s: %w", c.Nodes[i].Name(), err)
		}
		ps, err := c.Nodes[i].PodStart(tl.Pod)
		if err != nil {
			return nil, nil, nil, err
		}
		logf("joins: %s Ready → released %s, → agent pod gone %s", c.Nodes[i].Name(), ms(tl.ToRelease()), ms(tl.Total()))
		timelines, starts = append(timelines, tl), append(starts, ps)
	}
	return timelines, starts, foreign, nil
}

// foreignNode is what became of a node that joined with foreignTaint.
type foreignNode struct {
	agents int    // agent pods bound to it foreignWait after it was Ready
	status string // kubectl nodeready status of it: state, no agent, summary
}

// joinForeign starts node i with foreignTaint beside the startup taint, waits until it is
// Ready and foreignWait more, and reads what the cluster and `kubectl nodeready status` say
// of it.
func joinForeign(ctx context.Context, c *realnode.Cluster, repo string, i int) (foreignNode, error) {
	n := c.Nodes[i]
	n.AddTaints(foreignTaint)
	if err := c.StartNodeAt(ctx, i); err != nil {
		return foreignNode{}, err
	}
	client := c.CP.Client()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		node, err := client.CoreV1().Nodes().Get(ctx, n.Name(), metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return foreignNode{}, fmt.Errorf("wait for Ready: %w", err)
	}
	select {
	case <-ctx.Done():
		return foreignNode{}, ctx.Err()
	case <-time.After(foreignWait):
	}
	pods, err := client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/name=nodeready", FieldSelector: "spec.nodeName=" + n.Name()})
	if err != nil {
		return foreignNode{}, err
	}
	dir, err := os.MkdirTemp("", "nodeready-bench-plugin-")
	if err != nil {
		return foreignNode{}, err
	}
	defer os.RemoveAll(dir)
	plugin, err := harness.PluginBinary(ctx, repo, dir)
	if err != nil {
		return foreignNode{}, err
	}
	out, err := exec.CommandContext(ctx, plugin, "status", "-o", "json", "--kubeconfig", c.CP.Kubeconfig()).Output()
	if err != nil {
		return foreignNode{}, fmt.Errorf("kubectl nodeready status: %w", err)
	}
	var st struct {
		Nodes []struct {
			Name    string `json:"name"`
			State   string `json:"state"`
			NoAgent bool   `json:"noAgent"`
		} `json:"nodes"`
		Summary struct {
			HeldWithoutAgent []string `json:"heldWithoutAgent"`
		} `json:"summary"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return foreignNode{}, fmt.Errorf("kubectl nodeready status -o json: %w", err)
	}
	f := foreignNode{agents: len(pods.Items), status: "not listed"}
	for _, sn := range st.Nodes {
		if sn.Name == n.Name() {
			f.status = sn.State
			if sn.NoAgent {
				f.status += ", no agent"
			}
		}
	}
	if slices.Contains(st.Summary.HeldWithoutAgent, n.Name()) {
		f.status += "; in the summary's held without an agent"
	}
	return f, nil
}

// joinsChecks is a variant of the joins with other CHECKS: what a check adds to node Ready →
// released. kubeRouter runs kube-router's firewall on every node (started right after each
// node's kubelet, flanneld and kube-proxy) and installs the networkpolicy check's canary.
type joinsChecks struct {
	title, checks string
	kubeRouter    bool
}

// joinsCheckVariants: the default CHECKS without clock, as shipped, and with networkpolicy.
var joinsCheckVariants = []*joinsChecks{
	{title: "CHECKS without clock (dns,tcp,apiserver,endpoints)", checks: "dns,tcp,apiserver,endpoints"},
	{title: "CHECKS as shipped (dns,tcp,apiserver,clock,endpoints)", checks: "dns,tcp,apiserver,clock,endpoints"},
	{title: "CHECKS with networkpolicy, kube-router's firewall on every node", checks: "dns,tcp,apiserver,clock,endpoints,networkpolicy", kubeRouter: true},
}
