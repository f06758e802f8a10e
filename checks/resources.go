package checks

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodeready/nodeready/internal/envvar"
	"github.com/nodeready/nodeready/internal/kube"
)

var _ Check = (*Resource)(nil)

// ResourceMinimum is a resource name and the least allocatable quantity the
// node must offer, written "nvidia.com/gpu>=1".
type ResourceMinimum struct {
	Name corev1.ResourceName
	Min  resource.Quantity
}

// ParseResourceMinimum parses "name>=quantity". The name is a resource name
// (an extended resource such as nvidia.com/gpu, or cpu, memory,
// hugepages-2Mi); the quantity is a Kubernetes quantity (1, 2, 500m, 4Gi) and
// not negative.
func ParseResourceMinimum(s string) (ResourceMinimum, error) {
	name, qty, err := cutQualified(s, ">=", "name>=quantity, such as nvidia.com/gpu>=1", "resource name")
	if err != nil {
		return ResourceMinimum{}, err
	}
	q, err := resource.ParseQuantity(qty)
	if err != nil {
		return ResourceMinimum{}, fmt.Errorf("quantity %q of %s: want a quantity such as 1, 500m or 4Gi", qty, name)
	}
	if q.Sign() < 0 {
		return ResourceMinimum{}, fmt.Errorf("quantity %q of %s: must not be negative", qty, name)
	}
	return ResourceMinimum{Name: corev1.ResourceName(name), Min: q}, nil
}

// String returns the form ParseResourceMinimum accepts.
func (m ResourceMinimum) String() string { return string(m.Name) + ">=" + m.Min.String() }

// Resource passes when the node's allocatable amount of one resource reaches
// a minimum: a device plugin has registered and advertises its devices. A
// resource the node does not list fails, also for a minimum of 0.
type Resource struct{ nodeGate[ResourceMinimum] }

// NewResource returns a check that the node nodeName has at least min.
func NewResource(client kube.Interface, nodeName string, min ResourceMinimum) *Resource {
	return &Resource{nodeGate[ResourceMinimum]{name: NameResources, client: client, nodeName: nodeName, want: min}}
}

// judge implements nodeWant.
func (m ResourceMinimum) judge(node *corev1.Node) error {
	got, ok := node.Status.Allocatable[m.Name]
	if !ok {
		return fmt.Errorf("node %s: no allocatable %s, want at least %s", node.Name, m.Name, m.Min.String())
	}
	if got.Cmp(m.Min) >= 0 {
		return nil
	}
	capacity := ""
	if cp, ok := node.Status.Capacity[m.Name]; ok && cp.Cmp(got) != 0 {
		capacity = " (capacity " + cp.String() + ")"
	}
	return fmt.Errorf("node %s: allocatable %s is %s%s, want at least %s", node.Name, m.Name, got.String(), capacity, m.Min.String())
}

// ResourcesOptions are the resources gate's variables.
type ResourcesOptions struct {
	Resources envvar.List `envconfig:"REQUIRED_RESOURCES" desc:"resources: minimums of the node's allocatable resources, such as nvidia.com/gpu>=1,example.com/fpga>=2; required when CHECKS has resources"`

	// Min is REQUIRED_RESOURCES as Validate read it.
	Min []ResourceMinimum `ignored:"true"`
}

// Validate implements KindOptions.
func (o *ResourcesOptions) Validate(_ *Options, use Use) (err error) {
	o.Min, err = parseTargets("REQUIRED_RESOURCES", o.Resources, use.Selected,
		"CHECKS has resources: name>=quantity pairs such as nvidia.com/gpu>=1",
		ParseResourceMinimum,
		func(m ResourceMinimum) string { return string(m.Name) },
		func(m ResourceMinimum) string { return fmt.Sprintf("resource %s", m.Name) })
	return err
}

// Checks implements KindOptions: one check per resource.
func (o *ResourcesOptions) Checks(_ *Options, env Env) []Check {
	return perTarget(NameResources, o.Min, env.noAPI(), ResourceMinimum.String, func(min ResourceMinimum) Check {
		return NewResource(env.Client, env.Node, min)
	})
}
