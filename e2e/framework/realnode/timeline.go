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
	"k8s.io/apimachinery/pkg/watch"
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

// Step is one step of a Timeline.
type Step struct {
	Name string
	Took time.Duration
}

// Recorder watches the node, the agent pods and the Events from Record until Wait.
type Recorder struct {
	mu     sync.Mutex
	t      Timeline
	cancel context.CancelFunc
	done   chan struct{}
}

// Record starts recording the first agent pod's path on the cluster's node.
func (c *Cluster) Record(ctx context.Context) (*Recorder, error) {
	ctx, cancel := context.WithCancel(ctx)
	r := &Recorder{cancel: cancel, done: make(chan struct{})}
	podLogsDir := c.Node.PodLogsDir()
	client := c.CP.Client()
	nodes, err := client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + c.NodeName})
	if err != nil {
		cancel()
		return nil, err
	}
	pods, err := client.CoreV1().Pods("kube-system").Watch(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=nodeready"})
	if err != nil {
		cancel()
		return nil, err
	}
	events, err := client.CoreV1().Events("kube-system").Watch(ctx, metav1.ListOptions{FieldSelector: "reason=Pulled"})
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
				pod, need := r.t.Pod, r.t.Released.IsZero()
				r.mu.Unlock()
				if pod != "" && need {
					if started, released, err := agentTimes(podLogsDir, pod); err == nil {
						r.mu.Lock()
						r.t.AgentStarted, r.t.Released = started, released
						r.mu.Unlock()
					}
				}
			case ev := <-nodes.ResultChan():
				if n, ok := ev.Object.(*corev1.Node); ok {
					for _, cond := range n.Status.Conditions {
						if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
							r.mark(&r.t.NodeReady)
						}
					}
				}
			case ev := <-pods.ResultChan():
				p, ok := ev.Object.(*corev1.Pod)
				if !ok {
					continue
				}
				r.mu.Lock()
				if r.t.Pod == "" {
					r.t.Pod = p.Name
				}
				mine := r.t.Pod == p.Name
				r.mu.Unlock()
				if !mine {
					continue
				}
				r.mark(&r.t.PodCreated)
				if p.Spec.NodeName != "" {
					r.mark(&r.t.PodBound)
				}
				for _, cs := range p.Status.ContainerStatuses {
					if cs.State.Running != nil || cs.State.Terminated != nil {
						r.mark(&r.t.ContainerStarted)
					}
				}
				if ev.Type == watch.Deleted {
					r.mark(&r.t.PodGone)
				}
			case ev := <-events.ResultChan():
				if e, ok := ev.Object.(*corev1.Event); ok {
					r.mu.Lock()
					mine := e.InvolvedObject.Name == r.t.Pod
					r.mu.Unlock()
					if mine {
						r.mark(&r.t.ImagePulled)
					}
				}
			}
		}
	}()
	return r, nil
}

// mark sets *at to now, once.
func (r *Recorder) mark(at *time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if at.IsZero() {
		*at = time.Now()
	}
}

// Wait waits until the pod is gone (or ctx ends) and returns the timeline.
func (r *Recorder) Wait(ctx context.Context) (Timeline, error) {
	for {
		r.mu.Lock()
		t := r.t
		r.mu.Unlock()
		if !t.PodGone.IsZero() {
			break
		}
		select {
		case <-ctx.Done():
			r.cancel()
			return t, fmt.Errorf("agent pod %q not gone: %w", t.Pod, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	r.cancel()
	<-r.done
	t := r.t
	if t.Released.IsZero() {
		return t, fmt.Errorf("no release in the container log of %s", t.Pod)
	}
	return t, nil
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
