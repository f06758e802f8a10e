package checks

import (
	"context"
	"errors"
	"fmt"
	"strings"

	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nodeready/nodeready/internal/envvar"
	"github.com/nodeready/nodeready/internal/kube"
)

var _ Check = (*CSIDriver)(nil)

// ValidateCSIDriverName reports whether name can be a CSI driver name: at
// most 63 characters, a DNS subdomain when lower-cased (ebs.csi.aws.com), as
// the API server validates it.
func ValidateCSIDriverName(name string) error {
	if len(name) > 63 {
		return fmt.Errorf("%q: longer than 63 characters", name)
	}
	if errs := validation.IsDNS1123Subdomain(strings.ToLower(name)); len(errs) > 0 {
		return fmt.Errorf("%q: %s", name, strings.Join(errs, "; "))
	}
	return nil
}

// CSIDriver passes when the node's CSINode (storage.k8s.io/v1, named like the
// node) lists one driver: the kubelet writes it there once the driver's node
// plugin has registered. With requireAllocatable the entry must also carry
// allocatable.count, the number of volumes the scheduler may attach to the
// node; before the kubelet sets it the scheduler does not limit volumes per
// node for that driver. Drivers that report no limit never set it.
type CSIDriver struct {
	client             kube.Interface
	nodeName           string
	driver             string
	requireAllocatable bool
}

// NewCSIDriver returns a check that driver is registered on the node nodeName.
func NewCSIDriver(client kube.Interface, nodeName, driver string, requireAllocatable bool) *CSIDriver {
	return &CSIDriver{client: client, nodeName: nodeName, driver: driver, requireAllocatable: requireAllocatable}
}

// Name implements Check.
func (c *CSIDriver) Name() string { return string(NameCSI) }

// Target implements Check.
func (c *CSIDriver) Target() string { return c.driver }

// Run implements Check.
func (c *CSIDriver) Run(ctx context.Context) error {
	if c.nodeName == "" {
		return errors.New("get csinode: no node name (NODE_NAME)")
	}
	csiNode, err := c.client.StorageV1().CSINodes().Get(ctx, c.nodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("csi driver %s: not registered on %s (no CSINode yet)", c.driver, c.nodeName)
	}
	if err != nil {
		return fmt.Errorf("get csinode %q: %w", c.nodeName, gateError(err, "csi"))
	}
	var names []string
	for _, d := range csiNode.Spec.Drivers {
		if d.Name != c.driver {
			names = append(names, d.Name)
			continue
		}
		if c.requireAllocatable && !hasAllocatableCount(d) {
			return fmt.Errorf("csi driver %s: registered on %s without an allocatable volume count", c.driver, c.nodeName)
		}
		return nil
	}
	others := "no driver"
	if len(names) > 0 {
		others = strings.Join(names, ", ")
	}
	return fmt.Errorf("csi driver %s: not registered on %s (CSINode lists %s)", c.driver, c.nodeName, others)
}

func hasAllocatableCount(d storagev1.CSINodeDriver) bool {
	return d.Allocatable != nil && d.Allocatable.Count != nil
}

// CSIOptions are the csi gate's variables.
type CSIOptions struct {
	Drivers            envvar.List `envconfig:"CSI_DRIVERS" desc:"csi: CSI drivers that must be registered in the node's CSINode, such as ebs.csi.aws.com; required when CHECKS has csi"`
	RequireAllocatable bool        `envconfig:"CSI_REQUIRE_ALLOCATABLE" default:"true" desc:"csi: also require the driver's allocatable volume count; false for drivers that report no volume limit"`
}

// Validate implements KindOptions.
func (o *CSIOptions) Validate(_ *Options, use Use) error {
	if use.Selected && len(o.Drivers) == 0 {
		return envvar.Required("CSI_DRIVERS", "CHECKS has csi: CSI driver names such as ebs.csi.aws.com")
	}
	for _, d := range o.Drivers {
		if err := ValidateCSIDriverName(d); err != nil {
			return &envvar.Error{Var: "CSI_DRIVERS", Value: d, Accepted: "not a CSI driver name: " + err.Error()}
		}
	}
	return nil
}

// Checks implements KindOptions: one check per driver.
func (o *CSIOptions) Checks(_ *Options, env Env) []Check {
	return perTarget(NameCSI, o.Drivers, env.noAPI(), func(d string) string { return d }, func(d string) Check {
		return NewCSIDriver(env.Client, env.Node, d, o.RequireAllocatable)
	})
}
