package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeready/nodeready/e2e/framework/harness"
	"github.com/nodeready/nodeready/e2e/framework/history"
	"github.com/nodeready/nodeready/e2e/framework/kubelet"
)

// podTimes is what a watch of the agent pods saw of the pod on one node.
type podTimes struct {
	name                    string
	created, bound, running time.Time
	deletionRequested, gone time.Time
}

// podWatch is the life of the agent pods, by node: a view that follows a history of them.
type podWatch struct {
	mu    sync.Mutex
	nodes map[string]*podTimes // node -> its first agent pod
	byPod map[string]string    // pod -> node
}

// agentPod is what podWatch needs of one version of an agent pod.
type agentPod struct {
	node            string // podNode
	bound, deleting bool
}

func watchAgentPods(ctx context.Context, client kubernetes.Interface) (*podWatch, error) {
	pw := &podWatch{nodes: map[string]*podTimes{}, byPod: map[string]string{}}
	rec, err := history.Record(ctx, history.Pods(client, harness.Namespace, metav1.ListOptions{LabelSelector: harness.AgentSelector}),
		func(p *corev1.Pod) agentPod {
			return agentPod{node: podNode(p), bound: p.Spec.NodeName != "", deleting: p.DeletionTimestamp != nil}
		})
	if err != nil {
		return nil, err
	}
	rec.Follow(pw.handle)
	return pw, nil
}

func (pw *podWatch) handle(name string, e history.Entry[agentPod]) {
	if e.Listed {
		return // not an event: a pod there before the nodes, or a time that is the list's
	}
	at := e.At
	pw.mu.Lock()
	defer pw.mu.Unlock()
	node, known := pw.byPod[name]
	if !known {
		node = e.State.node
		if node == "" || pw.nodes[node] != nil {
			return // not a DaemonSet pod, or a later pod on the same node
		}
		pw.byPod[name] = node
		pw.nodes[node] = &podTimes{name: name, created: at}
	}
	t := pw.nodes[node]
	if t.name != name {
		return
	}
	if t.bound.IsZero() && e.State.bound {
		t.bound = at
	}
	if t.deletionRequested.IsZero() && e.State.deleting {
		t.deletionRequested = at
	}
	if e.Deleted && t.gone.IsZero() {
		t.gone = at
	}
}

func (pw *podWatch) get(node string) (podTimes, bool) {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	t := pw.nodes[node]
	if t == nil {
		return podTimes{}, false
	}
	return *t, true
}

// podNode is the node a DaemonSet pod is for: its binding, or before that the node its
// affinity names.
func podNode(p *corev1.Pod) string {
	if p.Spec.NodeName != "" {
		return p.Spec.NodeName
	}
	a := p.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			if f.Key == "metadata.name" && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

// dsTimeout bounds the wait for the DaemonSet benchmark's nodes and pods.
const dsTimeout = 3 * time.Minute

// benchDaemonSet registers nodes at once through a fleet (the simulated kubelet, which
// runs the agent binary for every pod bound to its nodes) and follows each through the
// real DaemonSet controller and scheduler, from watches on nodes and pods.
func benchDaemonSet(ctx context.Context, c *harness.Cluster, nodes int) *section {
	s := &section{Title: fmt.Sprintf("daemonset %d", nodes)}
	client := c.Client()
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	pw, err := watchAgentPods(watchCtx, client)
	if err != nil {
		s.Err = err
		return s
	}
	f, err := c.NewFleet(ctx, "ds")
	if err != nil {
		s.Err = err
		return s
	}
	defer f.Stop()
	nw, err := watchNodes(watchCtx, client, harness.FleetLabel+"="+f.Name(), nil)
	if err != nil {
		s.Err = err
		return s
	}

	names := make([]string, nodes)
	requested := make([]time.Time, nodes)
	addErrs := make([]error, nodes)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range names {
		names[i] = fmt.Sprintf("ds-%d", i)
		wg.Go(func() {
			requested[i] = time.Now()
			addErrs[i] = f.AddNode(ctx, names[i], harness.NodeOptions{})
		})
	}
	wg.Wait()

	waitCtx, cancel := context.WithTimeout(ctx, dsTimeout)
	defer cancel()
	var allVerified time.Duration
	for i, name := range names {
		if addErrs[i] != nil {
			continue
		}
		if at, err := nw.wait(waitCtx, name); err == nil {
			allVerified = max(allVerified, at.Sub(start))
		}
	}
	goneErr := f.WaitAgentsGone(waitCtx, names...)
	allGone := time.Since(start)
	// The pod watch may trail the kubelet's records by a moment.
	time.Sleep(500 * time.Millisecond)

	// The kubelet's records: when it started each agent process, and when that ended.
	ran := map[string]kubelet.PodInfo{}
	for _, p := range f.Kubelet().Pods() {
		ran[p.Name] = p
	}

	var (
		created, bound, started, verified, delReq, exited, gone durations
		toVerified, toGone                                      durations
		own                                                     phases
	)
	for i, name := range names {
		if addErrs[i] != nil {
			s.Failures++
			s.note("%s: %v", name, addErrs[i])
			continue
		}
		added, labelled, ok := nw.times(name)
		pt, podOK := pw.get(name)
		info := ran[pt.name]
		if !ok || !podOK || pt.bound.IsZero() || pt.gone.IsZero() || info.Started.IsZero() || len(info.Exits) == 0 {
			s.Failures++
			s.note("%s: incomplete: node verified %v, pod %+v, kubelet %+v", name, ok, pt, info)
			continue
		}
		exit := info.Exits[0]
		if exit.Code != 0 || !exit.Signaled || exit.Killed {
			s.Failures++
			s.note("%s: agent pod %s ended %+v", name, pt.name, exit)
		}
		if added.IsZero() || added.After(pt.created) {
			added = requested[i]
		}
		created = append(created, pt.created.Sub(added))
		bound = append(bound, pt.bound.Sub(pt.created))
		started = append(started, info.Started.Sub(pt.bound))
		verified = append(verified, labelled.Sub(info.Started))
		delReq = append(delReq, pt.deletionRequested.Sub(labelled))
		exited = append(exited, exit.At.Sub(pt.deletionRequested))
		gone = append(gone, pt.gone.Sub(exit.At))
		toVerified = append(toVerified, labelled.Sub(added))
		toGone = append(toGone, pt.gone.Sub(added))
		if v, err := parseVerifiedFile(filepath.Join(f.LogDir(), fmt.Sprintf("%s_%s_0.log", harness.Namespace, pt.name))); err == nil {
			own.add(v)
		} else {
			s.note("%s: agent log: %v", name, err)
		}
	}
	s.goal("nodes verified and agent pods gone / failures", fmt.Sprintf("%d / %d", len(toVerified), s.Failures), "0 failures", s.Failures == 0 && goneErr == nil)
	s.add("all verified / all agent pods gone (from first node created)", secs(allVerified)+" / "+secs(allGone))
	s.add("node created to verified", toVerified.summary(false))
	s.add("node created to agent pod gone", toGone.summary(false))
	s.add("1. node created to pod created (DaemonSet controller)", created.summary(false))
	s.add("2. pod created to pod bound (scheduler)", bound.summary(false))
	s.add("3. pod bound to agent started (kubelet: token, env, exec)", started.summary(false))
	s.add("4. agent started to node verified (label seen)", verified.summary(false))
	s.add("5. verified to pod deletion requested (DaemonSet controller)", delReq.summary(false))
	s.add("6. deletion requested to agent exited (SIGTERM; release and settle window finish)", exited.summary(false))
	s.add("7. agent exited to pod gone (kubelet's final status, deletion)", gone.summary(false))
	own.rows(s, "agent: ")
	if n, err := verifiedEvents(ctx, client, names); err == nil {
		s.verifiedEventsGoal(n, nodes)
	}
	s.note("The %d nodes are registered at once by a fleet (`harness.Fleet.AddNode`), each Ready with the startup taint and its own "+
		"node-local DNS server; the real DaemonSet controller creates the agent pods, the real scheduler binds them and the "+
		"simulated kubelet runs `bin/nodeready` for each. Times are when a watch on nodes or on the agent pods saw the change "+
		"except the start and exit of each agent process, which are the kubelet's records (`kubelet.PodInfo`). Step 6 is mostly "+
		"the agent's settle window (`SETTLE_TIME=%s`): it watches its node that long after the release, also after SIGTERM.", nodes, settleTime(ctx, client))
	if goneErr != nil {
		s.note("waiting for the agent pods to go: %v", goneErr)
	}
	return s
}

// settleTime is SETTLE_TIME as installed.
func settleTime(ctx context.Context, client kubernetes.Interface) string {
	cm, err := client.CoreV1().ConfigMaps(harness.Namespace).Get(ctx, harness.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		return "?"
	}
	return cm.Data["SETTLE_TIME"]
}
