package harness

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeready/nodeready/internal/wellknown"
)

// AgentCondition returns the node's node-ready/Verified condition, or nil.
func AgentCondition(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == wellknown.ConditionType {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// WaitAgentCondition waits until the node reports the agent's condition with reason.
func (c *Cluster) WaitAgentCondition(ctx context.Context, node, reason string) (corev1.NodeCondition, error) {
	var last *corev1.NodeCondition
	err := poll(ctx, func(ctx context.Context) (bool, error) {
		n, err := c.Client().CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, nil // the API server may be restarting; keep polling
		}
		last = AgentCondition(n)
		return last != nil && last.Reason == reason, nil
	})
	if err != nil {
		return corev1.NodeCondition{}, fmt.Errorf("node %s never reported %s with reason %s; last %+v: %w", node, wellknown.ConditionType, reason, last, err)
	}
	return *last, nil
}

// IsReleased reports whether the node carries the verified label and not the startup taint.
func IsReleased(n *corev1.Node) bool {
	v := n.Labels[wellknown.VerifiedLabel]
	return (v == "true" || v == wellknown.FailedOpenValue) && !IsTainted(n)
}

// IsTainted reports whether the node carries the startup taint (by key and effect, as the
// agent matches it).
func IsTainted(n *corev1.Node) bool {
	startup := wellknown.StartupTaint()
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&startup) })
}

// NodeEvents returns the events.k8s.io Events about the node with the given reason. Events
// about a Node live in the default namespace.
func (c *Cluster) NodeEvents(ctx context.Context, node, reason string) ([]eventsv1.Event, error) {
	list, err := c.Client().EventsV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind == "Node" && e.Regarding.Name == node && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out, nil
}
