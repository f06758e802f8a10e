package checks

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/nodeready/nodeready/internal/envvar"
	"github.com/nodeready/nodeready/internal/kube"
)

var _ Check = (*DRADevices)(nil)

// DeviceMinimum is a DRA driver, optionally a device attribute's value, and the least number
// of the node's devices that the driver must publish, written "gpu.nvidia.com>=1" or
// "gpu.nvidia.com[productName=NVIDIA A100-SXM4-80GB]>=8".
type DeviceMinimum struct {
	Driver string
	// Attribute is the attribute's fully qualified name (a name without a domain is in the
	// driver's, as the API defines it); "" counts every device.
	Attribute string
	Value     string
	Min       int
}

// ParseDeviceMinimum parses "driver>=count" or "driver[attribute=value]>=count". The driver
// is a DNS subdomain, as the API server validates it; the count is a whole number of at
// least 1. The value is compared with the attribute's string, number, bool or version as
// written, so it cannot hold a comma (the list separator) or "]".
func ParseDeviceMinimum(s string) (DeviceMinimum, error) {
	spec, count, ok := strings.Cut(s, ">=")
	spec, count = strings.TrimSpace(spec), strings.TrimSpace(count)
	if !ok {
		return DeviceMinimum{}, fmt.Errorf("%q: want driver>=count or driver[attribute=value]>=count, such as gpu.nvidia.com>=1", s)
	}
	var m DeviceMinimum
	m.Driver = spec
	if i := strings.IndexByte(spec, '['); i >= 0 {
		if !strings.HasSuffix(spec, "]") {
			return DeviceMinimum{}, fmt.Errorf("%q: the attribute ends with ]: driver[attribute=value]>=count", s)
		}
		m.Driver = spec[:i]
		attr, value, ok := strings.Cut(spec[i+1:len(spec)-1], "=")
		attr = strings.TrimSpace(attr)
		if !ok || attr == "" {
			return DeviceMinimum{}, fmt.Errorf("%q: want [attribute=value], such as [productName=NVIDIA A100-SXM4-80GB]", s)
		}
		if errs := validation.IsQualifiedName(attr); len(errs) > 0 {
			return DeviceMinimum{}, fmt.Errorf("attribute %q: %s", attr, strings.Join(errs, "; "))
		}
		m.Attribute, m.Value = qualifiedAttribute(m.Driver, attr), strings.TrimSpace(value)
	}
	if errs := validation.IsDNS1123Subdomain(m.Driver); len(errs) > 0 {
		return DeviceMinimum{}, fmt.Errorf("driver %q: %s", m.Driver, strings.Join(errs, "; "))
	}
	n, err := strconv.Atoi(count)
	if err != nil || n < 1 {
		return DeviceMinimum{}, fmt.Errorf("count %q of %s: want a whole number of at least 1", count, m.Driver)
	}
	m.Min = n
	return m, nil
}

// String returns the form ParseDeviceMinimum accepts.
func (m DeviceMinimum) String() string {
	if m.Attribute == "" {
		return m.Driver + ">=" + strconv.Itoa(m.Min)
	}
	return m.Driver + "[" + m.Attribute + "=" + m.Value + "]>=" + strconv.Itoa(m.Min)
}

// Key tells requirements apart: a driver with one attribute value is named once.
func (m DeviceMinimum) Key() string { return m.Driver + "[" + m.Attribute + "=" + m.Value + "]" }

// qualifiedAttribute is an attribute's full name: one without a domain is in the driver's.
func qualifiedAttribute(driver, name string) string {
	if strings.Contains(name, "/") {
		return name
	}
	return driver + "/" + name
}

// ErrDRANotServed: the API server serves no version of resource.k8s.io that nodeready reads.
var ErrDRANotServed = errors.New("the API server serves no resource.k8s.io version nodeready reads (v1, v1beta1): " +
	"Dynamic Resource Allocation is GA and on from Kubernetes 1.34; on 1.32 and 1.33 it needs the DynamicResourceAllocation " +
	"feature gate and the resource.k8s.io API turned on")

// DRAAPI finds, once per process, which version of resource.k8s.io the API server serves.
// The DRA checks of one agent share it.
type DRAAPI struct {
	client kube.Interface

	mu      sync.Mutex
	version string
}

// NewDRAAPI returns the version finder for client.
func NewDRAAPI(client kube.Interface) *DRAAPI { return &DRAAPI{client: client} }

// draVersions are the versions nodeready reads, the newest first.
var draVersions = []string{"v1", "v1beta1"}

// Version returns the newest served version of resource.k8s.io among draVersions, or
// ErrDRANotServed. A found version is kept; a failed look-up is tried again next time.
func (a *DRAAPI) Version(ctx context.Context) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.version != "" {
		return a.version, nil
	}
	groups, err := a.client.Discovery().ServerGroups(ctx)
	if err != nil {
		return "", fmt.Errorf("discover api groups: %w", apiError(err))
	}
	for _, g := range groups.Groups {
		if g.Name != "resource.k8s.io" {
			continue
		}
		for _, v := range draVersions {
			if slices.ContainsFunc(g.Versions, func(gv metav1.GroupVersionForDiscovery) bool { return gv.Version == v }) {
				a.version = v
				return v, nil
			}
		}
	}
	return "", Misconfiguration(ErrDRANotServed)
}

// forget drops the version found, when it is version: the next look-up discovers it again.
func (a *DRAAPI) forget(version string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.version == version {
		a.version = ""
	}
}

// DRADevices passes when a DRA driver has published at least a minimum number of devices
// for the node: the ResourceSlices that apply to the node (its own, spec.nodeName, and
// those that select nodes, spec.nodeSelector, spec.allNodes or per device) form complete
// pools, every slice of a pool's newest generation present, and the devices of those pools
// that the node can use, of the attribute's value when one is given, reach the minimum.
// Each round reads two lists from the API server's watch cache, both narrowed by field
// selectors: the driver's slices of this node, and the driver's slices of no one node.
type DRADevices struct {
	client   kube.Interface
	api      *DRAAPI
	nodeName string
	min      DeviceMinimum
}

// NewDRADevices returns a check that the node nodeName has min's devices.
func NewDRADevices(client kube.Interface, api *DRAAPI, nodeName string, min DeviceMinimum) *DRADevices {
	return &DRADevices{client: client, api: api, nodeName: nodeName, min: min}
}

// Name implements Check.
func (c *DRADevices) Name() string { return string(NameDRA) }

// Target implements Check.
func (c *DRADevices) Target() string { return c.min.String() }

// Run implements Check.
func (c *DRADevices) Run(ctx context.Context) error {
	own, shared, err := c.slices(ctx)
	if errors.Is(err, errVersionGone) {
		// The API server that answered does not serve the version discovery found: in a
		// control-plane upgrade, API servers of two versions answer behind one endpoint.
		// The version is found again, once; a second 404 is the cluster's, not this node's.
		own, shared, err = c.slices(ctx)
	}
	if err != nil {
		return err
	}
	// The API server filters by the field selector; the check holds to the same rule itself.
	own = slices.DeleteFunc(own, func(s draSlice) bool { return s.driver != c.min.Driver || s.nodeName != c.nodeName })
	shared = slices.DeleteFunc(shared, func(s draSlice) bool { return s.driver != c.min.Driver || s.nodeName != "" })
	var node *corev1.Node
	if needsNode(shared) {
		if node, err = getNode(ctx, c.client, c.nodeName); err != nil {
			return err
		}
	}
	return evaluatePools(c.nodeName, node, c.min, append(own, shared...))
}

// slices reads the driver's slices of this node and of no one node, in the served version.
func (c *DRADevices) slices(ctx context.Context) (own, shared []draSlice, err error) {
	version, err := c.api.Version(ctx)
	if err != nil {
		return nil, nil, gateError(err, "dra")
	}
	if own, err = c.list(ctx, version, fields.Set{"spec.driver": c.min.Driver, "spec.nodeName": c.nodeName}); err != nil {
		return nil, nil, err
	}
	if shared, err = c.list(ctx, version, fields.Set{"spec.driver": c.min.Driver, "spec.nodeName": ""}); err != nil {
		return nil, nil, err
	}
	return own, shared, nil
}

// errVersionGone matches the 404 of a list in a version discovery found: the API server
// that answered does not serve it (any more, or yet).
var errVersionGone = errors.New("the API server that answered does not serve it")

// list reads the slices that match set from the watch cache, in the served version. A 404
// forgets the version, so that the next look-up discovers it again, and is the cluster's
// fault: every node's list would get the same answer.
func (c *DRADevices) list(ctx context.Context, version string, set fields.Set) ([]draSlice, error) {
	opts := metav1.ListOptions{FieldSelector: fields.SelectorFromSet(set).String(), ResourceVersion: "0"}
	out, err := listSlices(ctx, c.client, version, opts)
	if apierrors.IsNotFound(err) {
		c.api.forget(version)
		return nil, Misconfiguration(fmt.Errorf("list resourceslices (resource.k8s.io/%s): %w, although discovery found it "+
			"(API servers of two versions behind one endpoint, as in a control-plane upgrade): %w", version, errVersionGone, err))
	}
	if err != nil {
		return nil, fmt.Errorf("list resourceslices (resource.k8s.io/%s, %s): %w", version, opts.FieldSelector, gateError(err, "dra"))
	}
	return out, nil
}

// draSlice is what the check needs of a ResourceSlice, the same in every API version.
type draSlice struct {
	driver             string
	pool               string
	generation, count  int64
	selection          // of the whole slice, unless perDeviceSelection
	perDeviceSelection bool
	devices            []draDevice
}

// draDevice is a device of a slice: its attributes as strings by fully qualified name and,
// with per-device node selection, which nodes it serves.
type draDevice struct {
	attributes map[string]string
	selection
}

// selection is which nodes a slice or a device serves, as the API says it: one node by name,
// every node, or the nodes a selector matches.
type selection struct {
	nodeName     string
	allNodes     bool
	nodeSelector *corev1.NodeSelector
}

// serves reports whether the selection includes the node name (node, for a selector).
func (s selection) serves(name string, node *corev1.Node) bool {
	switch {
	case s.nodeName != "":
		return s.nodeName == name
	case s.allNodes:
		return true
	case s.nodeSelector != nil && node != nil:
		ns, err := nodeaffinity.NewNodeSelector(s.nodeSelector)
		return err == nil && ns.Match(node)
	}
	return false
}

// needsNode reports whether any slice selects nodes by labels, which needs the Node.
func needsNode(all []draSlice) bool {
	for _, s := range all {
		if s.nodeSelector != nil || slices.ContainsFunc(s.devices, func(d draDevice) bool { return d.nodeSelector != nil }) {
			return true
		}
	}
	return false
}

// evaluatePools applies the rule to the slices of one driver that may apply to the node:
// per pool only the newest generation counts, and only when all of its resourceSliceCount
// slices are there; then the devices that serve the node, of the attribute's value, count.
func evaluatePools(name string, node *corev1.Node, min DeviceMinimum, all []draSlice) error {
	byPool := map[string][]draSlice{}
	for _, s := range all {
		byPool[s.pool] = append(byPool[s.pool], s)
	}
	var (
		devices    int
		incomplete []string
		pools      = slices.Sorted(maps.Keys(byPool))
	)
	for _, pool := range pools {
		ss := byPool[pool]
		var newest int64
		for _, s := range ss {
			newest = max(newest, s.generation)
		}
		ss = slices.DeleteFunc(ss, func(s draSlice) bool { return s.generation != newest })
		var want int64
		for _, s := range ss {
			want = max(want, s.count)
		}
		if int64(len(ss)) < want {
			incomplete = append(incomplete, fmt.Sprintf("pool %s has %d of %d slices of generation %d", pool, len(ss), want, newest))
			continue
		}
		for _, s := range ss {
			if !s.perDeviceSelection && !s.serves(name, node) {
				continue
			}
			for _, d := range s.devices {
				if s.perDeviceSelection && !d.serves(name, node) {
					continue
				}
				if v, ok := d.attributes[min.Attribute]; min.Attribute == "" || ok && v == min.Value {
					devices++
				}
			}
		}
	}
	if devices >= min.Min {
		return nil
	}
	what := "devices"
	if min.Attribute != "" {
		what = "devices with " + min.Attribute + "=" + min.Value
	}
	if len(pools) == 0 {
		return fmt.Errorf("dra driver %s: no ResourceSlice for node %s, want %d %s (the driver has not published its devices)", min.Driver, name, min.Min, what)
	}
	msg := fmt.Sprintf("dra driver %s: %d of %d %s on node %s in pools %s", min.Driver, devices, min.Min, what, name, strings.Join(pools, ", "))
	if len(incomplete) > 0 {
		msg += "; incomplete, not counted: " + strings.Join(incomplete, "; ")
	}
	return errors.New(msg)
}

// DRAOptions are the dra gate's variables.
type DRAOptions struct {
	Devices envvar.List `envconfig:"DRA_DEVICES" desc:"dra: DRA drivers and the least number of devices each must publish for the node in complete ResourceSlice pools, such as gpu.nvidia.com>=8 or gpu.nvidia.com[productName=NVIDIA A100-SXM4-80GB]>=8; required when CHECKS has dra"`

	// Min is DRA_DEVICES as Validate read it.
	Min []DeviceMinimum `ignored:"true"`
}

// Validate implements KindOptions. Minimums of one driver and attribute value
// are the same target, whatever their counts.
func (o *DRAOptions) Validate(_ *Options, use Use) (err error) {
	o.Min, err = parseTargets("DRA_DEVICES", o.Devices, use.Selected,
		"CHECKS has dra: driver>=count pairs such as gpu.nvidia.com>=8",
		ParseDeviceMinimum, DeviceMinimum.Key, DeviceMinimum.String)
	return err
}

// Checks implements KindOptions: one check per driver and attribute value,
// sharing one discovery of the served version.
func (o *DRAOptions) Checks(_ *Options, env Env) []Check {
	api := NewDRAAPI(env.Client)
	return perTarget(NameDRA, o.Min, env.noAPI(), DeviceMinimum.String, func(min DeviceMinimum) Check {
		return NewDRADevices(env.Client, api, env.Node, min)
	})
}
