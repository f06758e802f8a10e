package harness

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeready/nodeready/e2e/framework/history"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// NodeState is what matters about a node's release at one moment.
type NodeState struct {
	Labelled bool // carries the verified label
	Tainted  bool // carries the startup taint
	// Intact: ForeignLabel and every one of ForeignTaints are there.
	Intact bool
}

func (s NodeState) String() string {
	return fmt.Sprintf("{labelled:%v tainted:%v intact:%v}", s.Labelled, s.Tainted, s.Intact)
}

// The states a node passes through when the agent releases it in one write. Any other
// state, such as labelled but still tainted, is a half-done release.
var (
	Unverified = NodeState{Labelled: false, Tainted: true, Intact: true}
	Released   = NodeState{Labelled: true, Tainted: false, Intact: true}
	// Unlabelled is a released node after `kubectl label node N node-ready/verified-`.
	Unlabelled = NodeState{Labelled: false, Tainted: false, Intact: true}
)

// NodeVersion is what a History keeps of each version of a node: enough to replay what every
// writer saw, without the rest of the object.
type NodeVersion struct {
	Labels  map[string]string
	Taints  []corev1.Taint
	Verdict *corev1.NodeCondition // the agent's condition node-ready/Verified, if any
}

func nodeVersion(n *corev1.Node) NodeVersion {
	return NodeVersion{Labels: n.Labels, Taints: n.Spec.Taints, Verdict: AgentCondition(n)}
}

// State is the version's NodeState.
func (v NodeVersion) State() NodeState {
	return NodeState{
		Labelled: v.Labels[wellknown.VerifiedLabel] == "true",
		Tainted:  hasTaints(v.Taints, []corev1.Taint{wellknown.StartupTaint()}),
		Intact:   v.Labels[ForeignLabel] == ForeignLabelValue && hasTaints(v.Taints, ForeignTaints),
	}
}

// History records every version of the nodes on a watch (e2e/framework/history, which says
// why it reconnects as it does). States gives each node's distinct states: a node that was
// ever labelled but still tainted, or untainted but not labelled, shows up there even if it
// was right again a moment later. Its methods are safe for concurrent use.
type History struct {
	*history.Recorder[NodeVersion]
}

// WatchNodes records the history of the nodes matching the label selector until ctx ends or
// Stop. It returns once the first list is recorded, so no later change is missed.
func WatchNodes(ctx context.Context, client kubernetes.Interface, selector string) (*History, error) {
	r, err := history.Record(ctx, history.Nodes(client, metav1.ListOptions{LabelSelector: selector}), nodeVersion)
	if err != nil {
		return nil, err
	}
	return &History{r}, nil
}

// States returns the distinct states the node went through, oldest first.
func (h *History) States(node string) []NodeState {
	var states []NodeState
	for _, e := range h.Entries(node) {
		if s := e.State.State(); !e.Deleted && (len(states) == 0 || states[len(states)-1] != s) {
			states = append(states, s)
		}
	}
	return states
}

// WaitLatest waits until the latest state recorded for the node is want. After an API server
// restart the watch may lag behind the node; a test waits for the final state it expects
// before it compares States.
func (h *History) WaitLatest(ctx context.Context, node string, want NodeState) error {
	err := poll(ctx, func(context.Context) (bool, error) {
		got := h.States(node)
		return len(got) > 0 && got[len(got)-1] == want, nil
	})
	if err != nil {
		return fmt.Errorf("node watch never saw %s in %v; states %v: %w", node, want, h.States(node), err)
	}
	return nil
}
