package checks

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeready/nodeready/internal/envvar"
	"github.com/nodeready/nodeready/internal/kube"
)

var _ Check = (*NodeCondition)(nil)

// ConditionStatuses lists the statuses a node condition can have.
var ConditionStatuses = []string{string(corev1.ConditionTrue), string(corev1.ConditionFalse), string(corev1.ConditionUnknown)}

// ConditionWant is a node condition type and the status it must have, written
// "Ready=True".
type ConditionWant struct {
	Type   corev1.NodeConditionType
	Status corev1.ConditionStatus
}

// ParseConditionWant parses "Type=Status". The type is a condition type as
// the kubelet or a node agent sets it (Ready, NetworkUnavailable,
// example.com/GPUHealthy); the status is True, False or Unknown, spelled so.
func ParseConditionWant(s string) (ConditionWant, error) {
	typ, status, err := cutQualified(s, "=", "Type=Status, such as Ready=True", "condition type")
	if err != nil {
		return ConditionWant{}, err
	}
	if !slices.Contains(ConditionStatuses, status) {
		return ConditionWant{}, fmt.Errorf("status %q of %s: want one of %s", status, typ, strings.Join(ConditionStatuses, ", "))
	}
	return ConditionWant{Type: corev1.NodeConditionType(typ), Status: corev1.ConditionStatus(status)}, nil
}

// String returns the form ParseConditionWant accepts.
func (w ConditionWant) String() string { return string(w.Type) + "=" + string(w.Status) }

// NodeCondition passes when one condition of the node has the wanted status.
// A condition the node does not report fails: nothing has vouched for it yet.
type NodeCondition struct{ nodeGate[ConditionWant] }

// NewNodeCondition returns a check that the node nodeName reports want.
func NewNodeCondition(client kube.Interface, nodeName string, want ConditionWant) *NodeCondition {
	return &NodeCondition{nodeGate[ConditionWant]{name: NameConditions, client: client, nodeName: nodeName, want: want}}
}

// judge implements nodeWant.
func (w ConditionWant) judge(node *corev1.Node) error {
	i := slices.IndexFunc(node.Status.Conditions, func(nc corev1.NodeCondition) bool { return nc.Type == w.Type })
	if i < 0 {
		return fmt.Errorf("node %s: no condition %s, want %s", node.Name, w.Type, w.Status)
	}
	got := node.Status.Conditions[i]
	if got.Status == w.Status {
		return nil
	}
	why := ""
	switch {
	case got.Reason != "" && got.Message != "":
		why = fmt.Sprintf(" (%s: %s)", got.Reason, got.Message)
	case got.Reason != "" || got.Message != "":
		why = fmt.Sprintf(" (%s%s)", got.Reason, got.Message)
	}
	return fmt.Errorf("node %s: condition %s is %s, want %s%s", node.Name, got.Type, got.Status, w.Status, why)
}

// ConditionsOptions are the conditions gate's variables.
type ConditionsOptions struct {
	Conditions envvar.List `envconfig:"NODE_CONDITIONS" default:"Ready=True" desc:"conditions: Type=Status pairs the node must report, such as Ready=True,NetworkUnavailable=False"`

	// Want is NODE_CONDITIONS as Validate read it.
	Want []ConditionWant `ignored:"true"`
}

// Validate implements KindOptions.
func (o *ConditionsOptions) Validate(_ *Options, use Use) (err error) {
	o.Want, err = parseTargets("NODE_CONDITIONS", o.Conditions, use.Selected,
		"CHECKS has conditions: Type=Status pairs such as Ready=True,NetworkUnavailable=False",
		ParseConditionWant,
		func(w ConditionWant) string { return string(w.Type) },
		func(w ConditionWant) string { return fmt.Sprintf("condition %s", w.Type) })
	return err
}

// Checks implements KindOptions: one check per condition.
func (o *ConditionsOptions) Checks(_ *Options, env Env) []Check {
	return perTarget(NameConditions, o.Want, env.noAPI(), ConditionWant.String, func(want ConditionWant) Check {
		return NewNodeCondition(env.Client, env.Node, want)
	})
}
