package realnode

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeready/nodeready/e2e/framework/harness"
	"github.com/nodeready/nodeready/e2e/framework/history"
)

// Timeline is the critical path of a new node's verification, as seen from the API (the time
// each change arrived at a watch) and the kubelet's container log (its own timestamps).
type Timeline struct {
	NodeReady        time.Time // the Node's Ready condition turned True
	PodCreated       time.Time // the DaemonSet controller created the agent pod
	PodBound         time.Time // the scheduler bound it to the node
	ImagePulled      time.Time // the kubelet's Pulled Event
	ContainerStarted time.Time // the pod's status shows the container running
	AgentStarted     time.Time // the agent's "Started verification" log line
	Released         time.Time // the agent's "Released node" log line
	PodGone          time.Time // the pod was deleted from the API
	Pod              string
}

// Steps returns the steps of the path with the time each took, in order.
func (t Timeline) Steps() []Step {
	marks := []struct {
		name string
		at   time.Time
	}{
		{"node Ready → pod created", t.PodCreated}, {"pod created → bound", t.PodBound},
		{"bound → image pulled", t.ImagePulled}, {"image pulled → container started", t.ContainerStarted},
		{"container started → agent started", t.AgentStarted}, {"agent started → released", t.Released},
		{"released → pod gone", t.PodGone},
	}
	var steps []Step
	prev := t.NodeReady
	for _, m := range marks {
		steps = append(steps, Step{Name: m.name, Took: m.at.Sub(prev)})
		prev = m.at
	}
	return steps
}

// Total is node Ready to pod gone.
func (t Timeline) Total() time.Duration { return t.PodGone.Sub(t.NodeReady) }

// ToRelease is node Ready to the agent's release: what holds workloads off a Ready node.
func (t Timeline) ToRelease() time.Duration { return t.Released.Sub(t.NodeReady) }

// Step is one step of a Timeline.
type Step struct {
	Name string
	Took time.Duration
}

// Recorder records the node, the agent pods and the Pulled Events from Record until Wait;
// the Timeline is the first time each step was seen.
type Recorder struct {
	node   string
	nodes  *history.Recorder[bool] // Ready
	pods   *history.Recorder[agentPod]
	pulled *history.Recorder[string] // the pod an Event is about
	cancel context.CancelFunc
	done   chan struct{}

	mu                     sync.Mutex
	agentStarted, released time.Time // from the container log
}

// agentPod is what the timeline needs of one version of an agent pod.
type agentPod struct {
	node           string // bound to, or (before the scheduler binds it) the node its affinity names
	bound, started bool
}

// Record starts recording the first agent pod's path on the cluster's first node.
func (c *Cluster) Record(ctx context.Context) (*Recorder, error) { return c.RecordNode(ctx, 0) }

// RecordNode starts recording the path of the first agent pod for node i.
func (c *Cluster) RecordNode(ctx context.Context, i int) (*Recorder, error) {
	ctx, cancel := context.WithCancel(ctx)
	node := c.Nodes[i].Name()
	r := &Recorder{node: node, cancel: cancel, done: make(chan struct{})}
	podLogsDir := c.Nodes[i].PodLogsDir()
	client := c.CP.Client()
	var err error
	r.nodes, err = history.Record(ctx, history.Nodes(client, metav1.ListOptions{FieldSelector: "metadata.name=" + node}),
		func(n *corev1.Node) bool {
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					return true
				}
			}
			return false
		})
	if err == nil {
		r.pods, err = history.Record(ctx, history.Pods(client, "kube-system", metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=nodeready"}),
			func(p *corev1.Pod) agentPod {
				a := agentPod{node: harness.PodNode(p), bound: p.Spec.NodeName != ""}
				for _, cs := range p.Status.ContainerStatuses {
					a.started = a.started || cs.State.Running != nil || cs.State.Terminated != nil
				}
				return a
			})
	}
	if err == nil {
		r.pulled, err = history.Record(ctx, history.Events(client, "kube-system", metav1.ListOptions{FieldSelector: "reason=Pulled"}),
			func(e *corev1.Event) string { return e.InvolvedObject.Name })
	}
	if err != nil {
		cancel()
		return nil, err
	}
	// The kubelet removes the container log with the pod: it is read while the pod runs.
	readLog := time.NewTicker(100 * time.Millisecond)
	go func() {
		defer close(r.done)
		defer readLog.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-readLog.C:
				r.mu.Lock()
				need := r.released.IsZero()
				r.mu.Unlock()
				if pod := r.pod(); pod != "" && need {
					if started, released, err := agentTimes(podLogsDir, pod); err == nil {
						r.mu.Lock()
						r.agentStarted, r.released = started, released
						r.mu.Unlock()
					}
				}
			}
		}
	}()
	return r, nil
}

// pod is the first agent pod seen for the node: the one the timeline follows.
func (r *Recorder) pod() string {
	for _, name := range r.pods.Names() {
		if _, ok := r.pods.First(name, func(e history.Entry[agentPod]) bool { return e.State.node == r.node }); ok {
			return name
		}
	}
	return ""
}

// timeline is the first time each step was seen so far.
func (r *Recorder) timeline() Timeline {
	t := Timeline{Pod: r.pod()}
	t.NodeReady = atOf(r.nodes.First(r.node, func(e history.Entry[bool]) bool { return e.State }))
	if t.Pod != "" {
		t.PodCreated = atOf(r.pods.First(t.Pod, func(history.Entry[agentPod]) bool { return true }))
		t.PodBound = atOf(r.pods.First(t.Pod, func(e history.Entry[agentPod]) bool { return e.State.bound }))
		t.ContainerStarted = atOf(r.pods.First(t.Pod, func(e history.Entry[agentPod]) bool { return e.State.started }))
		t.PodGone = atOf(r.pods.First(t.Pod, func(e history.Entry[agentPod]) bool { return e.Deleted }))
		for _, name := range r.pulled.Names() {
			e, ok := r.pulled.First(name, func(e history.Entry[string]) bool { return e.State == t.Pod })
			if ok && (t.ImagePulled.IsZero() || e.At.Before(t.ImagePulled)) {
				t.ImagePulled = e.At
			}
		}
	}
	r.mu.Lock()
	t.AgentStarted, t.Released = r.agentStarted, r.released
	r.mu.Unlock()
	return t
}

// atOf is the time of First's entry, zero if none.
func atOf[S any](e history.Entry[S], _ bool) time.Time { return e.At }

// Wait waits until the pod is gone (or ctx ends) and returns the timeline.
func (r *Recorder) Wait(ctx context.Context) (Timeline, error) {
	defer r.stop()
	for {
		t := r.timeline()
		if !t.PodGone.IsZero() {
			break
		}
		select {
		case <-ctx.Done():
			return t, fmt.Errorf("agent pod %q not gone: %w", t.Pod, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	r.stop()
	t := r.timeline()
	if t.Released.IsZero() {
		return t, fmt.Errorf("no release in the container log of %s", t.Pod)
	}
	return t, nil
}

// stop ends the watches and the log reader and waits for them.
func (r *Recorder) stop() {
	r.cancel()
	<-r.done
	r.nodes.Stop()
	r.pods.Stop()
	r.pulled.Stop()
}

// agentTimes reads the kubelet's timestamps of the agent's start and release lines.
func agentTimes(podLogsDir, pod string) (started, released time.Time, err error) {
	logs, _ := filepath.Glob(filepath.Join(podLogsDir, "kube-system_"+pod+"_*", "nodeready", "0.log"))
	if len(logs) != 1 {
		return started, released, fmt.Errorf("no container log of %s in %s", pod, podLogsDir)
	}
	f, err := os.Open(logs[0])
	if err != nil {
		return started, released, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		// CRI log format: <RFC3339Nano> <stream> <tag> <message>
		stamp, msg, _ := strings.Cut(sc.Text(), " ")
		at, err := time.Parse(time.RFC3339Nano, stamp)
		if err != nil {
			continue
		}
		switch {
		case started.IsZero() && strings.Contains(msg, `"message":"Started verification"`):
			started = at
		case released.IsZero() && strings.Contains(msg, `"message":"Released node"`):
			released = at
		}
	}
	if started.IsZero() || released.IsZero() {
		return started, released, fmt.Errorf("no start or release line in %s", logs[0])
	}
	return started, released, sc.Err()
}
