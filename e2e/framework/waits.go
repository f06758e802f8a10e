package framework

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeready/nodeready/e2e/framework/harness"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// Poll calls cond every PollInterval until it is done, bounded by WaitTimeout and the test.
func (f *Framework) Poll(cond wait.ConditionWithContextFunc) error { return Poll(f.t, cond) }

// Poll calls cond every PollInterval until it is done, bounded by WaitTimeout and t.
func Poll(t testing.TB, cond wait.ConditionWithContextFunc) error {
	return wait.PollUntilContextTimeout(t.Context(), PollInterval, WaitTimeout, true, cond)
}

// Node returns the node as the API server has it; a failed read fails the test.
func (f *Framework) Node(name string) *corev1.Node {
	f.t.Helper()
	return GetNode(f.t, f.Client(), name)
}

// GetNode returns the node as the API server shows it to client (an admin, a kubelet, an
// agent's token); a failed read fails the test.
func GetNode(t testing.TB, client kubernetes.Interface, name string) *corev1.Node {
	t.Helper()
	n, err := client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get node %s: %v", name, err)
	}
	return n
}

// RequireHeld fails the test unless the node carries the startup taint and not the label.
func (f *Framework) RequireHeld(node string) {
	f.t.Helper()
	n := f.Node(node)
	if !harness.IsTainted(n) {
		f.t.Fatalf("node %s lost the startup taint; taints %v", node, n.Spec.Taints)
	}
	if _, ok := n.Labels[wellknown.VerifiedLabel]; ok {
		f.t.Fatalf("node %s is labelled %s while held", node, wellknown.VerifiedLabel)
	}
}

// WaitCondition waits until the node reports the agent's condition with reason; a timeout
// fails the test.
func (f *Framework) WaitCondition(node, reason string) corev1.NodeCondition {
	f.t.Helper()
	cond, err := f.env.cluster.WaitAgentCondition(f.t.Context(), node, reason)
	if err != nil {
		f.t.Fatal(err)
	}
	return cond
}

// NodeEvents returns the Events about the node with the reason.
func (f *Framework) NodeEvents(node, reason string) ([]eventsv1.Event, error) {
	return f.env.cluster.NodeEvents(f.t.Context(), node, reason)
}

// WaitEvent waits for an Event about the node with the reason (the agent sends Events
// asynchronously) and returns the first; a timeout fails the test.
func (f *Framework) WaitEvent(node, reason string) eventsv1.Event {
	f.t.Helper()
	var found []eventsv1.Event
	err := f.Poll(func(ctx context.Context) (bool, error) {
		var err error
		found, err = f.env.cluster.NodeEvents(ctx, node, reason)
		return err == nil && len(found) > 0, nil
	})
	if err != nil {
		f.t.Fatalf("no %s Event about node %s: %v", reason, node, err)
	}
	return found[0]
}

// RequireNoEvent fails the test when an Event about the node has the reason.
func (f *Framework) RequireNoEvent(node, reason string) {
	f.t.Helper()
	found, err := f.NodeEvents(node, reason)
	if err != nil {
		f.t.Fatalf("list %s Events about node %s: %v", reason, node, err)
	}
	if len(found) > 0 {
		f.t.Fatalf("%d %s Events about node %s, want none: first %q", len(found), reason, node, found[0].Note)
	}
}

// PodsOn returns every pod bound to the node.
func (f *Framework) PodsOn(ctx context.Context, node string) ([]corev1.Pod, error) {
	list, err := f.Client().CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// PodReady reports whether the pod's Ready condition is True.
func PodReady(p *corev1.Pod) bool { return PodCondition(p, corev1.PodReady) == corev1.ConditionTrue }

// PodCondition is the status of the pod's condition of type t, Unknown when it has none.
func PodCondition(p *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}

// Taints renders the node's taints as kubectl does (key=value:Effect).
func Taints(n *corev1.Node) []string {
	var s []string
	for _, t := range n.Spec.Taints {
		s = append(s, t.ToString())
	}
	return s
}

// PodSummary names the pods with their phase and readiness, for a failure message.
func PodSummary(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, fmt.Sprintf("%s %s ready=%v", p.Name, p.Status.Phase, PodReady(&p)))
	}
	return out
}
