package checks

import (
	"context"
	"strconv"

	resourcev1 "k8s.io/api/resource/v1"
	resourcev1beta1 "k8s.io/api/resource/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodeready/nodeready/internal/kube"
)

// One conversion per version of resource.k8s.io into draSlice: v1 (GA and on in
// Kubernetes 1.34+) and v1beta1 (1.32 and 1.33, where DRA is off unless turned on, and
// where turning it on serves v1beta1). v1beta2 (1.33+) has v1's shape; a cluster that
// serves it serves v1 or v1beta1 too.

// listSlices reads the slices that match opts in version, one of draVersions.
func listSlices(ctx context.Context, c kube.Interface, version string, opts metav1.ListOptions) ([]draSlice, error) {
	if version == "v1" {
		list, err := c.ResourceV1().ResourceSlices().List(ctx, opts)
		if err != nil {
			return nil, err
		}
		return convertSlices(list.Items, sliceV1), nil
	}
	list, err := c.ResourceV1beta1().ResourceSlices().List(ctx, opts)
	if err != nil {
		return nil, err
	}
	return convertSlices(list.Items, sliceV1beta1), nil
}

// convertSlices converts one version's slices with one.
func convertSlices[S any](items []S, one func(S) draSlice) []draSlice {
	out := make([]draSlice, 0, len(items))
	for _, s := range items {
		out = append(out, one(s))
	}
	return out
}

func sliceV1(s resourcev1.ResourceSlice) draSlice {
	ds := draSlice{driver: s.Spec.Driver, pool: s.Spec.Pool.Name,
		generation: s.Spec.Pool.Generation, count: s.Spec.Pool.ResourceSliceCount,
		selection:          selection{ptr.Deref(s.Spec.NodeName, ""), ptr.Deref(s.Spec.AllNodes, false), s.Spec.NodeSelector},
		perDeviceSelection: ptr.Deref(s.Spec.PerDeviceNodeSelection, false)}
	for _, d := range s.Spec.Devices {
		ds.devices = append(ds.devices, draDevice{
			attributes: attributeStrings(s.Spec.Driver, d.Attributes, func(a resourcev1.DeviceAttribute) (string, bool) {
				return attributeString(a.StringValue, a.IntValue, a.BoolValue, a.VersionValue)
			}),
			selection: selection{ptr.Deref(d.NodeName, ""), ptr.Deref(d.AllNodes, false), d.NodeSelector}})
	}
	return ds
}

func sliceV1beta1(s resourcev1beta1.ResourceSlice) draSlice {
	ds := draSlice{driver: s.Spec.Driver, pool: s.Spec.Pool.Name,
		generation: s.Spec.Pool.Generation, count: s.Spec.Pool.ResourceSliceCount,
		selection:          selection{s.Spec.NodeName, s.Spec.AllNodes, s.Spec.NodeSelector},
		perDeviceSelection: ptr.Deref(s.Spec.PerDeviceNodeSelection, false)}
	for _, d := range s.Spec.Devices {
		dev := draDevice{attributes: map[string]string{}}
		if b := d.Basic; b != nil {
			dev.selection = selection{ptr.Deref(b.NodeName, ""), ptr.Deref(b.AllNodes, false), b.NodeSelector}
			dev.attributes = attributeStrings(s.Spec.Driver, b.Attributes, func(a resourcev1beta1.DeviceAttribute) (string, bool) {
				return attributeString(a.StringValue, a.IntValue, a.BoolValue, a.VersionValue)
			})
		}
		ds.devices = append(ds.devices, dev)
	}
	return ds
}

// attributeStrings is a device's attributes by fully qualified name, as DRA_DEVICES compares
// them; value reads one attribute of the version's type.
func attributeStrings[K ~string, A any](driver string, attrs map[K]A, value func(A) (string, bool)) map[string]string {
	out := make(map[string]string, len(attrs))
	for name, a := range attrs {
		if v, ok := value(a); ok {
			out[qualifiedAttribute(driver, string(name))] = v
		}
	}
	return out
}

// attributeString is a device attribute's value as DRA_DEVICES compares it: the string,
// the number in decimal, true or false, or the version.
func attributeString(s *string, i *int64, b *bool, v *string) (string, bool) {
	switch {
	case s != nil:
		return *s, true
	case i != nil:
		return strconv.FormatInt(*i, 10), true
	case b != nil:
		return strconv.FormatBool(*b), true
	case v != nil:
		return *v, true
	}
	return "", false
}
