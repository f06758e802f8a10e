package nodepatch

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeready/nodeready/internal/wellknown"
)

// State is what the agent must know of its node before it may act on it.
type State struct {
	// Tainted: the node carries the startup taint.
	Tainted bool
	// Labelled: the node carries the verified label.
	Labelled bool
	// Registered: the node is not Karpenter's, or Karpenter has registered
	// it (and so merged its startupTaints into it).
	Registered bool
	// VerifiedBefore: the node carries nodeready's completion record, so
	// nodeready released it once.
	VerifiedBefore bool
	// Created is the node's creationTimestamp (whole seconds).
	Created time.Time
}

// taintNames lists the startup taints as key=value:effect, for messages.
func (s Spec) taintNames() string {
	names := make([]string, len(s.Taints))
	for i, t := range s.Taints {
		names[i] = t.ToString()
	}
	return strings.Join(names, ", ")
}

// Record returns the annotation that records a release: the time of the
// release (wellknown.ReleasedAtAnnotation). Release writes it; its presence is
// how nodeready knows it has verified a node before.
func (s Spec) Record() string { return wellknown.ReleasedAtAnnotation(s.LabelKey) }

// State reports what the agent needs of the node, as the watch shows it or
// read.
func (p *Patcher) State(ctx context.Context) (State, error) {
	node, err := p.latest(ctx)
	if err != nil {
		return State{}, err
	}
	return p.state(node), nil
}

func (p *Patcher) state(node *corev1.Node) State {
	_, record := node.Annotations[p.spec.Record()]
	return State{
		Tainted:        p.hasTaint(node),
		Labelled:       p.labelled(node),
		Registered:     registered(node),
		VerifiedBefore: record,
		Created:        node.CreationTimestamp.Time,
	}
}

// registered reports whether node is not Karpenter's or Karpenter has
// registered it.
func registered(node *corev1.Node) bool {
	_, managed := node.Labels[karpenterNodePoolLabel]
	return !managed || node.Labels[karpenterRegisteredLabel] == "true"
}
