package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/nodeready/nodeready/internal/wellknown"
)

// controllers are nodeready's reporting controllers, and how why names them.
var controllers = map[string]string{
	wellknown.AgentController:     "agent",
	wellknown.UninstallController: "uninstall",
	wellknown.PluginController:    "kubectl-nodeready",
}

// NodeReport is `kubectl nodeready why NODE -o json|yaml`: what why prints for people.
type NodeReport struct {
	metav1.TypeMeta `json:",inline"`
	// Keys are the taints and label the node was judged by, and where they were read.
	Keys Keys `json:"keys"`
	// Node is the node as status tells it, with its agent pods.
	Node NodeStatus `json:"node"`
	// Next says what a person may do about the node in its state.
	Next string `json:"next"`
	// Events are the latest of nodeready's Events about the node, latest first (--events).
	Events []NodeEvent `json:"events"`
	// EventsTotal counts nodeready's Events about the node, shown or not.
	EventsTotal int `json:"eventsTotal"`
}

// NodeEvent is one of nodeready's Events about a node.
type NodeEvent struct {
	LastSeen metav1.Time `json:"lastSeen"`
	Type     string      `json:"type"`
	Reason   string      `json:"reason"`
	Count    int32       `json:"count"`
	// From names the reporting controller: agent, uninstall or kubectl-nodeready.
	From string `json:"from"`
	Note string `json:"note"`
}

// DeepCopyObject makes NodeReport a runtime.Object, for cli-runtime's printers.
func (r *NodeReport) DeepCopyObject() runtime.Object {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err) // API types and strings only
	}
	out := &NodeReport{}
	if err := json.Unmarshal(b, out); err != nil {
		panic(err)
	}
	return out
}

// nodeReport is the machine-readable form of why.
func nodeReport(k Keys, n NodeStatus, events []eventsv1.Event, maxEvents int) *NodeReport {
	r := &NodeReport{
		TypeMeta:    metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: "NodeReport"},
		Keys:        k,
		Node:        n,
		Next:        next(n, k),
		Events:      []NodeEvent{},
		EventsTotal: len(events),
	}
	for _, e := range events[:min(len(events), max(maxEvents, 0))] {
		r.Events = append(r.Events, NodeEvent{LastSeen: metav1.NewTime(lastSeen(e)), Type: e.Type, Reason: e.Reason, Count: count(e),
			From: controllers[e.ReportingController], Note: e.Note})
	}
	return r
}

// runWhy is `kubectl nodeready why NODE`.
func (o *Options) runWhy(ctx context.Context, name string, maxEvents int, output string) error {
	var printer printers.ResourcePrinter
	if output != "" {
		if printer = objectPrinter(output, false); printer == nil {
			return fmt.Errorf("-o %s: use json or yaml", output)
		}
	}
	client, k, node, err := o.setupNode(ctx, name)
	if err != nil {
		return err
	}
	n := nodeStatus(k, node)
	pods, err := o.agentPods(ctx, client, name)
	if err != nil {
		return err
	}
	n.Agents = pods[name]
	events, err := nodeEvents(ctx, client, node)
	switch {
	case apierrors.IsForbidden(err):
		o.warn(fmt.Sprintf("could not list the node's Events: %v", err))
	case err != nil:
		return err
	}
	if printer != nil {
		return printer.PrintObj(nodeReport(k, n, events, maxEvents), o.streams.Out)
	}
	return printWhy(o.streams.Out, k, n, events, maxEvents, o.now())
}

// nodeEvents lists nodeready's Events about node, latest first. Events about a Node, a
// cluster-scoped object, are in the default namespace.
func nodeEvents(ctx context.Context, client Client, node *corev1.Node) ([]eventsv1.Event, error) {
	list, err := client.EventsV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
		FieldSelector: fields.Set{"regarding.kind": "Node", "regarding.name": node.Name}.String(),
	})
	if err != nil {
		return nil, fmt.Errorf("list the Events of node %s: %w", node.Name, err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if _, ours := controllers[e.ReportingController]; ours && e.Regarding.Kind == "Node" && e.Regarding.Name == node.Name {
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(a, b eventsv1.Event) int { return lastSeen(b).Compare(lastSeen(a)) })
	return out, nil
}

// lastSeen is when an Event, or the last of its series, was seen.
func lastSeen(e eventsv1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.DeprecatedLastTimestamp.IsZero():
		return e.DeprecatedLastTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

// count is how often an Event was seen.
func count(e eventsv1.Event) int32 {
	switch {
	case e.Series != nil:
		return e.Series.Count
	case e.DeprecatedCount > 0:
		return e.DeprecatedCount
	}
	return 1
}

// printWhy prints one node's story for a person.
func printWhy(out io.Writer, k Keys, n NodeStatus, events []eventsv1.Event, maxEvents int, now time.Time) error {
	w := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	row := func(name, format string, args ...any) {
		fmt.Fprintf(w, "%s:\t%s\n", name, fmt.Sprintf(format, args...))
	}
	row("Node", "%s", n.Name)
	row("State", "%s%s", n.State, since(n.Since, now))
	row("Startup taints", "%s", orNone(strings.Join(n.StartupTaints, ", ")))
	label := "<none>"
	if n.Label != nil {
		label = *n.Label
	}
	row("Verified label", "%s=%s", k.Label, label)
	if c := n.Condition; c != nil {
		row("Condition", "%s=%s, %s%s", c.Type, c.Status, dash(c.Reason), since(&c.LastTransitionTime, now))
	} else {
		row("Condition", "none: no agent has reported on this node")
	}
	if n.VerifiedAt != nil {
		row("Verified", "%s%s", when(n.VerifiedAt, now), prefixed(", in ", n.VerificationDuration))
	}
	if n.ReleasedAt != nil || n.ReleasedBy != "" {
		row("Released by hand", "by %s, %s", orUnknown(n.ReleasedBy), when(n.ReleasedAt, now))
	}
	var agents []string
	for _, p := range n.Agents {
		phase := string(p.Phase)
		if p.Terminating {
			phase += ", terminating"
		}
		agents = append(agents, fmt.Sprintf("%s/%s (%s, %d restarts)", p.Namespace, p.Name, phase, p.Restarts))
	}
	row("Agent pod", "%s", orNone(strings.Join(agents, ", ")))
	row("Next", "%s", next(n, k))
	if err := w.Flush(); err != nil {
		return err
	}
	if n.Message != "" {
		fmt.Fprintf(out, "\nMessage:\n%s\n", indent(n.Message))
	}
	if len(events) == 0 {
		_, err := fmt.Fprintln(out, "\nEvents from nodeready: none")
		return err
	}
	shown := events[:min(len(events), max(maxEvents, 0))]
	fmt.Fprintf(out, "\nEvents from nodeready, latest first (%d of %d):\n", len(shown), len(events))
	w = tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(w, "  LAST SEEN\tTYPE\tREASON\tCOUNT\tFROM\tNOTE")
	for _, e := range shown {
		fmt.Fprintf(w, "  %s\t%s\t%s\t%d\t%s\t%s\n", age(&metav1.Time{Time: lastSeen(e)}, now), e.Type, e.Reason, count(e),
			controllers[e.ReportingController], strings.ReplaceAll(e.Note, "\n", " "))
	}
	return w.Flush()
}

// next says what a person may do about a node in its state.
func next(n NodeStatus, k Keys) string {
	switch n.State {
	case Held:
		if len(n.Agents) == 0 {
			return "no agent pod runs here: see the DaemonSet's tolerations and node affinity; kubectl nodeready release " + n.Name + " releases it unverified"
		}
		return "fix what the condition and the CheckFailed Events name; the agent releases the node once its checks pass. Break-glass: kubectl nodeready release " + n.Name
	case Misconfigured:
		return "the cluster or nodeready's configuration stands in the way, not the node: fix what the message names (RBAC, the admission policy, a setting); the agent releases the node by itself"
	case Reverifying:
		return "an agent checks the node again and labels it once its checks pass"
	case Verified:
		return "nothing; kubectl nodeready reverify " + n.Name + " checks it again"
	case FailedOpen:
		return "released with failing checks: fix the node, then kubectl nodeready reverify " + n.Name
	case HandReleased:
		return "released without verification: kubectl nodeready reverify " + n.Name + " checks it"
	}
	return "nodeready does not hold this node: an agent labels it once its checks pass, if nodeready serves it (Linux, not virtual-kubelet); " + k.Label + " on the node keeps the agent away"
}

// since says since when, as " since 5m (2024-05-01T10:00:00Z)", or nothing when unknown.
func since(t *metav1.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return fmt.Sprintf(" since %s (%s)", age(t, now), t.UTC().Format(time.RFC3339))
}

// when says when, as "5m ago (2024-05-01T10:00:00Z)".
func when(t *metav1.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "at an unknown time"
	}
	return fmt.Sprintf("%s ago (%s)", age(t, now), t.UTC().Format(time.RFC3339))
}

func prefixed(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ")
}
