package verify

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/history"
	"github.com/nodeready/nodeready/e2e/framework/realnode"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// podLog is every state of the agent pods that the API server shows, from a watch.
type podLog struct {
	rec *history.Recorder[*corev1.Pod]
}

func watchAgentPods(t *testing.T, c *realnode.Cluster) *podLog {
	t.Helper()
	rec, err := history.Record(t.Context(), history.Pods(c.CP.Client(), "kube-system", metav1.ListOptions{LabelSelector: framework.AgentSelector}),
		func(p *corev1.Pod) *corev1.Pod { return p })
	require.NoError(t, err)
	t.Cleanup(rec.Stop)
	return &podLog{rec}
}

// pods returns the names of the agent pods seen so far.
func (l *podLog) pods() []string { return l.rec.Names() }

func (l *podLog) isGone(name string) bool {
	_, gone := l.rec.First(name, func(e history.Entry[*corev1.Pod]) bool { return e.Deleted })
	return gone
}

func (l *podLog) history(name string) []corev1.Pod {
	var states []corev1.Pod
	for _, e := range l.rec.Entries(name) {
		states = append(states, *e.State)
	}
	return states
}

// newPod waits for an agent pod not seen before (not in known) and returns its name.
func (l *podLog) newPod(t *testing.T, known []string) string {
	t.Helper()
	var name string
	poll(t, 3*time.Minute, "a new agent pod", func() bool {
		for _, p := range l.pods() {
			if !slices.Contains(known, p) {
				name = p
				return true
			}
		}
		return false
	})
	return name
}

// lastContainerState is the agent container's last state the kubelet reported for pod.
func (l *podLog) lastContainerStatus(name string) (corev1.ContainerStatus, bool) {
	h := l.history(name)
	for i := len(h) - 1; i >= 0; i-- {
		for _, cs := range h[i].Status.ContainerStatuses {
			if cs.State.Terminated != nil {
				return cs, true
			}
		}
	}
	return corev1.ContainerStatus{}, false
}

// wasReady reports whether the pod was ever Ready while it was not being deleted.
func (l *podLog) wasReady(name string) bool {
	for _, p := range l.history(name) {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
				return true
			}
		}
	}
	return false
}

func poll(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	require.NoError(t, err, "waiting for %s", what)
}

func getNode(t *testing.T, c *realnode.Cluster) *corev1.Node {
	t.Helper()
	n, err := c.CP.Client().CoreV1().Nodes().Get(t.Context(), c.NodeName, metav1.GetOptions{})
	require.NoError(t, err)
	return n
}

func tainted(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == wellknown.StartupTaint().Key })
}

// warnings returns the Warning Events about the node or the pod since a time.
func warnings(t *testing.T, c *realnode.Cluster, pod string, since time.Time) []corev1.Event {
	t.Helper()
	list, err := c.CP.Client().CoreV1().Events("").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	var out []corev1.Event
	for _, e := range list.Items {
		if e.Type == corev1.EventTypeWarning && (e.InvolvedObject.Name == pod || e.InvolvedObject.Name == c.NodeName) && seenSince(e, since) {
			out = append(out, e)
		}
	}
	return out
}

// nodeEventReasons returns the reasons of the Events about the node since a time.
func nodeEventReasons(t *testing.T, c *realnode.Cluster, since time.Time) []string {
	t.Helper()
	list, err := c.CP.Client().CoreV1().Events("").List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + c.NodeName})
	require.NoError(t, err)
	var out []string
	for _, e := range list.Items {
		if seenSince(e, since) {
			out = append(out, e.Reason)
		}
	}
	return out
}

// seenSince reports whether the Event was last seen at or after since. The kubelet's Events
// carry whole seconds (LastTimestamp), so they are compared to since's second; nodeready's
// (events.k8s.io: EventTime, a series' last observation) carry microseconds and are compared
// exactly, so that the first agent's Events a moment before since are not counted.
func seenSince(e corev1.Event, since time.Time) bool {
	switch {
	case e.Series != nil:
		return !e.Series.LastObservedTime.Time.Before(since)
	case !e.EventTime.IsZero():
		return !e.EventTime.Time.Before(since)
	default:
		return !e.LastTimestamp.Time.Before(since.Truncate(time.Second))
	}
}
