package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"
)

// GroupVersion names the plugin's machine-readable output (`-o json|yaml`). It is no API
// the cluster serves: only the form of what the plugin prints, kept stable within it.
var GroupVersion = schema.GroupVersion{Group: "nodeready.io", Version: "v1alpha1"}

// FleetStatus is `kubectl nodeready status -o json|yaml`.
type FleetStatus struct {
	metav1.TypeMeta `json:",inline"`
	// Keys are the taints and label the nodes were judged by, and where they were read.
	Keys Keys `json:"keys"`
	// Nodes are the nodes, by name.
	Nodes []NodeStatus `json:"nodes"`
	// Summary counts the nodes per state.
	Summary Summary `json:"summary"`
}

// NodeStatus is one node as nodeready sees it.
type NodeStatus struct {
	Name  string `json:"name"`
	State State  `json:"state"`
	// Since is when the node entered its state, when the node tells it.
	Since *metav1.Time `json:"since,omitempty"`
	// Reason and Message are nodeready's condition's, with what the node's marks add.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Condition is nodeready's condition node-ready/Verified as the agent last wrote it.
	Condition *corev1.NodeCondition `json:"condition,omitempty"`
	// StartupTaints are the startup taints the node carries, as key=value:effect.
	StartupTaints []string `json:"startupTaints,omitempty"`
	// Label is the verified label's value, absent when the node has no such label.
	Label *string `json:"label,omitempty"`
	// VerifiedAt and VerificationDuration are the agent's completion record.
	VerifiedAt           *metav1.Time `json:"verifiedAt,omitempty"`
	VerificationDuration string       `json:"verificationDuration,omitempty"`
	// ReleasedBy and ReleasedAt record a release by hand.
	ReleasedBy string       `json:"releasedBy,omitempty"`
	ReleasedAt *metav1.Time `json:"releasedAt,omitempty"`
	// Agents are the agent pods bound to the node.
	Agents []AgentPod `json:"agents,omitempty"`
	// NoAgent: the node carries a startup taint, is not labelled, and no agent pod is bound
	// to it, so nothing of nodeready's verifies or releases it (a taint the DaemonSet does
	// not tolerate, a node not Ready yet). Told when the agent pods were listed.
	NoAgent bool        `json:"noAgent,omitempty"`
	Created metav1.Time `json:"created"`
}

// AgentPod is an agent's pod on a node.
type AgentPod struct {
	Namespace string          `json:"namespace"`
	Name      string          `json:"name"`
	Phase     corev1.PodPhase `json:"phase"`
	Restarts  int32           `json:"restarts"`
	// Terminating: the pod is being deleted (its node was released).
	Terminating bool `json:"terminating,omitempty"`
}

// Summary counts the fleet.
type Summary struct {
	Nodes  int           `json:"nodes"`
	States map[State]int `json:"states"`
	// LongestHold is the node held the longest now, by a startup taint, when one is.
	LongestHold *Hold `json:"longestHold,omitempty"`
	// HeldWithoutAgent are the nodes held with no agent pod bound to them (NoAgent).
	HeldWithoutAgent []string `json:"heldWithoutAgent,omitempty"`
}

// Hold is one node's current hold.
type Hold struct {
	Node  string      `json:"node"`
	Since metav1.Time `json:"since"`
}

// DeepCopyObject makes FleetStatus a runtime.Object, for cli-runtime's printers.
func (s *FleetStatus) DeepCopyObject() runtime.Object {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err) // API types and strings only
	}
	out := &FleetStatus{}
	if err := json.Unmarshal(b, out); err != nil {
		panic(err)
	}
	return out
}

// statusOptions are the flags of status.
type statusOptions struct {
	selector string
	wide     bool
	// agents lists the agent pods too, so that a held node without one is told.
	agents bool
}

// fleetStatus lists the nodes (one LIST; the agent pods with another when asked) and judges
// each.
func (o *Options) fleetStatus(ctx context.Context, client Client, k Keys, so statusOptions) (*FleetStatus, error) {
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: so.selector})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	var pods map[string][]AgentPod
	if so.agents {
		if pods, err = o.agentPods(ctx, client, ""); err != nil {
			return nil, err
		}
	}
	return fleetOf(k, nodes.Items, pods), nil
}

// fleetOf judges the nodes, with their agent pods when listed (pods not nil): a held node
// without one is told then.
func fleetOf(k Keys, nodes []corev1.Node, pods map[string][]AgentPod) *FleetStatus {
	s := &FleetStatus{
		TypeMeta: metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: "FleetStatus"},
		Keys:     k,
		Nodes:    []NodeStatus{},
		Summary:  Summary{States: map[State]int{}},
	}
	slices.SortFunc(nodes, func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	for i := range nodes {
		n := nodeStatus(k, &nodes[i])
		n.Agents = pods[n.Name]
		if pods != nil && n.State.holding() && len(n.StartupTaints) > 0 && n.Label == nil && len(n.Agents) == 0 {
			n.NoAgent = true
			n.Message = strings.TrimSuffix(noAgentNote(k, &nodes[i])+"; "+n.Message, "; ")
			s.Summary.HeldWithoutAgent = append(s.Summary.HeldWithoutAgent, n.Name)
		}
		s.Nodes = append(s.Nodes, n)
		s.Summary.States[n.State]++
		if n.State.holding() && len(n.StartupTaints) > 0 && n.Since != nil &&
			(s.Summary.LongestHold == nil || n.Since.Before(&s.Summary.LongestHold.Since)) {
			s.Summary.LongestHold = &Hold{Node: n.Name, Since: *n.Since}
		}
	}
	s.Summary.Nodes = len(s.Nodes)
	return s
}

// noAgentNote says that no agent runs on a held node, and what may keep it away, short
// enough for the table: the node not Ready (the DaemonSet's pod comes once it is), or its
// other NoSchedule taints, one of which the DaemonSet may not tolerate (it tolerates every
// NoExecute taint).
func noAgentNote(k Keys, node *corev1.Node) string {
	note := "no agent pod here"
	ready := false
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	if !ready {
		note += " (not Ready)"
	}
	var others []string
	for _, t := range node.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule && !k.isStartupTaint(t) {
			others = append(others, t.ToString())
		}
	}
	if len(others) > 0 {
		note += "; other taints: " + strings.Join(others, ", ")
	}
	return note
}

// nodeStatus is the status of one node.
func nodeStatus(k Keys, node *corev1.Node) NodeStatus {
	j := judge(k, node)
	n := NodeStatus{
		Name:                 node.Name,
		State:                j.state,
		Since:                j.since,
		Condition:            j.cond,
		StartupTaints:        j.taints,
		VerifiedAt:           j.verifiedAt,
		VerificationDuration: j.duration,
		ReleasedBy:           j.releasedBy,
		ReleasedAt:           j.releasedAt,
		Created:              node.CreationTimestamp,
	}
	if j.labelled {
		n.Label = &j.label
	}
	if j.cond != nil {
		n.Reason, n.Message = j.cond.Reason, j.cond.Message
	}
	if j.note != "" {
		n.Message = strings.TrimSuffix(j.note+"; "+n.Message, "; ")
	}
	return n
}

// agentPods lists the agent pods, bound to node or to any node when node is empty, by node.
func (o *Options) agentPods(ctx context.Context, client Client, node string) (map[string][]AgentPod, error) {
	opts := metav1.ListOptions{LabelSelector: o.agentSelector}
	if node != "" {
		opts.FieldSelector = "spec.nodeName=" + node
	}
	list, err := client.CoreV1().Pods(o.namespace()).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("list the agent pods in %s (%s): %w", o.namespace(), o.agentSelector, err)
	}
	out := map[string][]AgentPod{}
	for _, p := range list.Items {
		if p.Spec.NodeName == "" || (node != "" && p.Spec.NodeName != node) {
			continue
		}
		a := AgentPod{Namespace: p.Namespace, Name: p.Name, Phase: p.Status.Phase, Terminating: p.DeletionTimestamp != nil}
		for _, c := range p.Status.ContainerStatuses {
			a.Restarts += c.RestartCount
		}
		out[p.Spec.NodeName] = append(out[p.Spec.NodeName], a)
	}
	for _, pods := range out {
		slices.SortFunc(pods, func(a, b AgentPod) int { return strings.Compare(a.Name, b.Name) })
	}
	return out, nil
}

// Widths of the message column, in characters: the table stays one line per node.
const (
	messageWidth     = 60
	wideMessageWidth = 120
)

// printTable prints the status as kubectl prints tables, then the summary line.
func printTable(w io.Writer, s *FleetStatus, wide bool, now time.Time) error {
	if len(s.Nodes) == 0 {
		_, err := fmt.Fprintln(w, "No nodes found.")
		return err
	}
	if err := printers.NewTablePrinter(printers.PrintOptions{Wide: wide}).PrintObj(statusTable(s.Nodes, wide, now), w); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, summaryLine(s.Summary, now))
	return err
}

// statusTable is the nodes' table, its wide columns at priority 1.
func statusTable(nodes []NodeStatus, wide bool, now time.Time) *metav1.Table {
	width := messageWidth
	if wide {
		width = wideMessageWidth
	}
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		{Name: "Node", Type: "string"},
		{Name: "State", Type: "string"},
		{Name: "Since", Type: "string"},
		{Name: "Reason", Type: "string"},
		{Name: "Message", Type: "string"},
		{Name: "Startup-Taints", Type: "string", Priority: 1},
		{Name: "Label", Type: "string", Priority: 1},
		{Name: "Verified-In", Type: "string", Priority: 1},
		{Name: "Released-By", Type: "string", Priority: 1},
		{Name: "Agent", Type: "string", Priority: 1},
	}}
	for _, n := range nodes {
		label := "<none>"
		if n.Label != nil {
			label = *n.Label
		}
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{
			n.Name, string(n.State), age(n.Since, now), dash(n.Reason), dash(shorten(n.Message, width)),
			dash(strings.Join(n.StartupTaints, ",")), label, dash(n.VerificationDuration), dash(n.ReleasedBy), agentCell(n.Agents),
		}})
	}
	return t
}

// summaryLine is the fleet in one line: the nodes per state, and the longest hold now.
func summaryLine(s Summary, now time.Time) string {
	var parts []string
	for _, st := range states {
		if n := s.States[st]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, st))
		}
	}
	line := fmt.Sprintf("%d nodes: %s", s.Nodes, strings.Join(parts, ", "))
	if s.Nodes == 1 {
		line = "1 node: " + strings.Join(parts, ", ")
	}
	if h := s.LongestHold; h != nil {
		line += fmt.Sprintf("; longest hold: %s, %s", h.Node, age(&h.Since, now))
	}
	if len(s.HeldWithoutAgent) > 0 {
		line += "; held without an agent: " + strings.Join(s.HeldWithoutAgent, ", ")
	}
	return line
}

// agentCell tells a node's agent pods: name, phase and restarts.
func agentCell(pods []AgentPod) string {
	var cells []string
	for _, p := range pods {
		phase := string(p.Phase)
		if p.Terminating {
			phase = "Terminating"
		}
		cells = append(cells, fmt.Sprintf("%s (%s, %d restarts)", p.Name, phase, p.Restarts))
	}
	return dash(strings.Join(cells, ","))
}

// age is how long ago t was, as kubectl's AGE column tells it; "-" when unknown.
func age(t *metav1.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// shorten cuts s to its first line and to width characters.
func shorten(s string, width int) string {
	s, _, cut := strings.Cut(s, "\n")
	r := []rune(s)
	if len(r) > width {
		return string(r[:width-3]) + "..."
	}
	if cut {
		return s + "..."
	}
	return s
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// runStatus is `kubectl nodeready status`.
func (o *Options) runStatus(ctx context.Context, selector string, watch bool) error {
	if output := o.printFlags.format; watch && output != "" {
		return fmt.Errorf("--watch prints the table: leave out -o %s", output)
	}
	if watch && o.printFlags.template != "" {
		return errors.New("--watch prints the table: leave out --template")
	}
	client, k, err := o.setup(ctx)
	if err != nil {
		return err
	}
	if watch {
		return o.watchStatus(ctx, client, k, selector)
	}
	// --template alone is a Go template, as kubectl takes it.
	output := o.printFlags.format
	table := (output == "" && o.printFlags.template == "") || output == "wide"
	s, err := o.fleetStatus(ctx, client, k, statusOptions{selector: selector, agents: true})
	if err != nil {
		return err
	}
	if table {
		return printTable(o.streams.Out, s, output == "wide", o.now())
	}
	p, err := o.printFlags.printer()
	if err != nil {
		return err
	}
	return p.PrintObj(s, o.streams.Out)
}
