package checks_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	resourcev1beta1 "k8s.io/api/resource/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/nodeready/nodeready/checks"
	"github.com/nodeready/nodeready/internal/kube/adapt"
)

func TestParseDeviceMinimum(t *testing.T) {
	testParse(t, checks.ParseDeviceMinimum, []parseCase{
		{in: "gpu.nvidia.com>=1", want: "gpu.nvidia.com>=1"},
		{in: " gpu.example.com >= 8 ", want: "gpu.example.com>=8"},
		// A name without a domain is in the driver's.
		{in: "gpu.nvidia.com[productName=NVIDIA A100-SXM4-80GB]>=8", want: "gpu.nvidia.com[gpu.nvidia.com/productName=NVIDIA A100-SXM4-80GB]>=8"},
		{in: "gpu.nvidia.com[resource.kubernetes.io/pcieRoot=pci0000:00]>=1", want: "gpu.nvidia.com[resource.kubernetes.io/pcieRoot=pci0000:00]>=1"},
		{in: "gpu.nvidia.com[productName=]>=1", want: "gpu.nvidia.com[gpu.nvidia.com/productName=]>=1"},
		{in: "gpu.nvidia.com=1", wantErr: `"gpu.nvidia.com=1": want driver>=count or driver[attribute=value]>=count`},
		{in: "gpu.nvidia.com>=0", wantErr: `count "0" of gpu.nvidia.com: want a whole number of at least 1`},
		{in: "gpu.nvidia.com>=1.5", wantErr: `count "1.5" of gpu.nvidia.com`},
		{in: "GPU_Driver>=1", wantErr: `driver "GPU_Driver"`},
		{in: "gpu.nvidia.com[productName]>=1", wantErr: "want [attribute=value]"},
		{in: "gpu.nvidia.com[productName=A100>=1", wantErr: "the attribute ends with ]"},
		{in: "gpu.nvidia.com[a/b/c=x]>=1", wantErr: `attribute "a/b/c"`},
	})
}

const (
	draNode   = "gpu-node"
	draDriver = "gpu.example.com"
)

// slice is a v1 ResourceSlice of draDriver for one pool generation, with n devices.
func slice(name, pool string, generation, count int64, n int, sel func(*resourcev1.ResourceSliceSpec)) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.ResourceSliceSpec{
			Driver: draDriver,
			Pool:   resourcev1.ResourcePool{Name: pool, Generation: generation, ResourceSliceCount: count},
		},
	}
	for i := range n {
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{
			Name: name + "-" + string(rune('a'+i)),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"productName": {StringValue: ptr.To("A100")},
				"memoryGiB":   {IntValue: ptr.To[int64](80)},
			},
		})
	}
	if sel == nil {
		sel = onNode(draNode)
	}
	sel(&s.Spec)
	return s
}

func onNode(node string) func(*resourcev1.ResourceSliceSpec) {
	return func(s *resourcev1.ResourceSliceSpec) { s.NodeName = ptr.To(node) }
}

func withDriver(driver string, s *resourcev1.ResourceSlice) *resourcev1.ResourceSlice {
	s.Spec.Driver = driver
	return s
}

// newDRA is the check that draNode has the devices want names, with its own version finder.
func newDRA(t *testing.T, client *fake.Clientset, want string) *checks.DRADevices {
	t.Helper()
	return checks.NewDRADevices(adapt.Clientset(client), checks.NewDRAAPI(adapt.Clientset(client)), draNode, mustParse(t, checks.ParseDeviceMinimum, want))
}

// draClient is a fake clientset whose discovery serves resource.k8s.io in versions.
func draClient(versions []string, objects ...runtime.Object) *fake.Clientset {
	c := fake.NewClientset(objects...)
	for _, v := range versions {
		c.Discovery().(*fakediscovery.FakeDiscovery).Resources = append(c.Discovery().(*fakediscovery.FakeDiscovery).Resources,
			&metav1.APIResourceList{GroupVersion: "resource.k8s.io/" + v, APIResources: []metav1.APIResource{{Name: "resourceslices", Kind: "ResourceSlice"}}})
	}
	return c
}

func TestDRADevices(t *testing.T) {
	gpuNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: draNode, Labels: map[string]string{"example.com/rack": "r1"}}}
	rack := func(r string) func(*resourcev1.ResourceSliceSpec) {
		return func(s *resourcev1.ResourceSliceSpec) {
			s.NodeSelector = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "example.com/rack", Operator: corev1.NodeSelectorOpIn, Values: []string{r}}},
			}}}
		}
	}
	// One complete pool of draNode's own with two devices.
	twoDevices := []runtime.Object{slice("s1", draNode, 1, 1, 2, nil)}
	// One device for draNode, one for another node.
	perDevice := slice("per-device", "per-device", 1, 1, 0, func(s *resourcev1.ResourceSliceSpec) {
		s.PerDeviceNodeSelection = ptr.To(true)
		s.Devices = []resourcev1.Device{{Name: "mine", NodeName: ptr.To(draNode)}, {Name: "theirs", NodeName: ptr.To("other-node")}}
	})
	tests := []struct {
		name    string
		want    string
		objects []runtime.Object
		wantErr string // "" passes
	}{
		{name: "no slice", want: draDriver + ">=1",
			wantErr: "dra driver gpu.example.com: no ResourceSlice for node gpu-node, want 1 devices (the driver has not published its devices)"},
		{name: "one complete pool", want: draDriver + ">=2",
			objects: twoDevices},
		{name: "too few devices", want: draDriver + ">=4",
			objects: twoDevices,
			wantErr: "dra driver gpu.example.com: 2 of 4 devices on node gpu-node in pools gpu-node"},
		{name: "a pool of two slices with one published", want: draDriver + ">=1",
			objects: []runtime.Object{slice("s1", draNode, 1, 2, 4, nil)},
			wantErr: "0 of 1 devices on node gpu-node in pools gpu-node; incomplete, not counted: pool gpu-node has 1 of 2 slices of generation 1"},
		{name: "a pool of two slices with both published", want: draDriver + ">=8",
			objects: []runtime.Object{slice("s1", draNode, 1, 2, 4, nil), slice("s2", draNode, 1, 2, 4, nil)}},
		{name: "only the newest generation counts", want: draDriver + ">=3",
			objects: []runtime.Object{slice("old1", draNode, 1, 2, 4, nil), slice("old2", draNode, 1, 2, 4, nil), slice("new1", draNode, 2, 2, 2, nil)},
			wantErr: "pool gpu-node has 1 of 2 slices of generation 2"},
		{name: "the newest generation complete", want: draDriver + ">=2",
			objects: []runtime.Object{slice("old1", draNode, 1, 1, 8, nil), slice("new1", draNode, 2, 1, 2, nil)}},
		{name: "slices of another node are ignored", want: draDriver + ">=1",
			objects: []runtime.Object{slice("other", "other-node", 1, 1, 8, onNode("other-node"))},
			wantErr: "no ResourceSlice for node gpu-node"},
		{name: "slices of another driver are ignored", want: draDriver + ">=1",
			objects: []runtime.Object{withDriver("fpga.example.com", slice("fpga", draNode, 1, 1, 8, nil))},
			wantErr: "no ResourceSlice for node gpu-node"},
		{name: "the attribute's value", want: draDriver + "[productName=A100]>=2",
			objects: twoDevices},
		{name: "a number attribute", want: draDriver + "[memoryGiB=80]>=2",
			objects: twoDevices},
		{name: "another value of the attribute", want: draDriver + "[productName=H100]>=1",
			objects: twoDevices,
			wantErr: "0 of 1 devices with gpu.example.com/productName=H100 on node gpu-node"},
		{name: "a pool for every node", want: draDriver + ">=2",
			objects: []runtime.Object{slice("all", "shared", 1, 1, 2, func(s *resourcev1.ResourceSliceSpec) { s.AllNodes = ptr.To(true) })}},
		{name: "a pool for the node's rack", want: draDriver + ">=2",
			objects: []runtime.Object{gpuNode, slice("rack", "rack-r1", 1, 1, 2, rack("r1"))}},
		{name: "a pool for another rack", want: draDriver + ">=1",
			objects: []runtime.Object{gpuNode, slice("rack", "rack-r2", 1, 1, 2, rack("r2"))},
			wantErr: "0 of 1 devices on node gpu-node in pools rack-r2"},
		{name: "devices that select nodes one by one", want: draDriver + ">=1",
			objects: []runtime.Object{perDevice}},
		{name: "devices that select other nodes one by one", want: draDriver + ">=2",
			objects: []runtime.Object{perDevice},
			wantErr: "1 of 2 devices"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newDRA(t, draClient([]string{"v1", "v1beta1"}, tt.objects...), tt.want)
			assert.Equal(t, "dra", c.Name())
			assertErrContains(t, c.Run(t.Context()), tt.wantErr)
		})
	}
}

// TestDRADevicesReads: one discovery, then two lists per round, narrowed to the driver and the node (and to
// slices of no one node), from the watch cache; the Node only when a slice selects by labels.
func TestDRADevicesReads(t *testing.T) {
	client := draClient([]string{"v1"}, slice("s1", draNode, 1, 1, 1, nil))
	c := newDRA(t, client, draDriver+">=1")
	require.NoError(t, c.Run(t.Context()))
	require.NoError(t, c.Run(t.Context()))

	// One discovery of the served version, for the process.
	actions := client.Actions()
	require.NotEmpty(t, actions)
	assert.Equal(t, schema.GroupVersionResource{Resource: "group"}, actions[0].GetResource(), "discovery first")
	var selectors []string
	for _, a := range actions[1:] {
		require.Equal(t, "list", a.GetVerb(), "%v", a)
		require.Equal(t, schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "resourceslices"}, a.GetResource())
		l := a.(k8stesting.ListActionImpl)
		selectors = append(selectors, l.GetListRestrictions().Fields.String())
	}
	assert.Equal(t, []string{
		"spec.driver=gpu.example.com,spec.nodeName=gpu-node", "spec.driver=gpu.example.com,spec.nodeName=",
		"spec.driver=gpu.example.com,spec.nodeName=gpu-node", "spec.driver=gpu.example.com,spec.nodeName=",
	}, selectors)
}

// betaSlice is a v1beta1 ResourceSlice of draNode with one device of productName A100.
func betaSlice() *resourcev1beta1.ResourceSlice {
	return &resourcev1beta1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "beta"},
		Spec: resourcev1beta1.ResourceSliceSpec{
			Driver: draDriver, NodeName: draNode,
			Pool: resourcev1beta1.ResourcePool{Name: draNode, Generation: 1, ResourceSliceCount: 1},
			Devices: []resourcev1beta1.Device{{Name: "gpu-0", Basic: &resourcev1beta1.BasicDevice{
				Attributes: map[resourcev1beta1.QualifiedName]resourcev1beta1.DeviceAttribute{"productName": {StringValue: ptr.To("A100")}},
			}}},
		},
	}
}

// TestDRADevicesV1beta1: a cluster that serves only v1beta1 (1.32 and 1.33 with DRA on).
func TestDRADevicesV1beta1(t *testing.T) {
	client := draClient([]string{"v1beta1"}, betaSlice())
	for want, pass := range map[string]bool{draDriver + "[productName=A100]>=1": true, draDriver + ">=2": false} {
		err := newDRA(t, client, want).Run(t.Context())
		assert.Equal(t, pass, err == nil, "%s: %v", want, err)
	}
}

// TestDRANotServed: an API server without resource.k8s.io gets one clear message, and a
// refused list names the file that grants it.
func TestDRANotServed(t *testing.T) {
	err := newDRA(t, draClient(nil), draDriver+">=1").Run(t.Context())
	require.ErrorIs(t, err, checks.ErrDRANotServed)
	assert.Contains(t, err.Error(), "Dynamic Resource Allocation is GA and on from Kubernetes 1.34")

	client := draClient([]string{"v1"})
	client.PrependReactor("list", "resourceslices", forbidden(schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceslices"}))
	err = newDRA(t, client, draDriver+">=1").Run(t.Context())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "kubectl apply -f manifests/gates/dra.yaml")
}

// TestDRAVersionGone: a 404 on the list of the version discovery found is the cluster's,
// never this node's: in a control-plane upgrade the next request may reach an API server of
// another version behind the same endpoint. The version is discovered again, once, and read
// there; where discovery still finds the version that 404s, the check is misconfigured.
func TestDRAVersionGone(t *testing.T) {
	notFoundIn := func(version string) k8stesting.ReactionFunc {
		return func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.GetResource().Version != version {
				return false, nil, nil
			}
			return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceslices"}, "")
		}
	}
	serve := func(client *fake.Clientset, versions ...string) {
		client.Discovery().(*fakediscovery.FakeDiscovery).Resources = draClient(versions).Discovery().(*fakediscovery.FakeDiscovery).Resources
	}
	discoveries := func(client *fake.Clientset) (n int) {
		for _, a := range client.Actions() {
			if a.GetResource().Resource == "group" {
				n++
			}
		}
		return n
	}

	// v1 is found and kept; the device is published in v1beta1 only.
	client := draClient([]string{"v1", "v1beta1"}, betaSlice())
	c := newDRA(t, client, draDriver+">=1")
	assertErrContains(t, c.Run(t.Context()), "no ResourceSlice for node gpu-node")
	// The next API server serves v1beta1 only (an older one, mid-upgrade): found again, read there.
	client.PrependReactor("list", "resourceslices", notFoundIn("v1"))
	serve(client, "v1beta1")
	require.NoError(t, c.Run(t.Context()))
	assert.Equal(t, 2, discoveries(client))

	// Discovery keeps finding v1 while its list 404s: the cluster's fault, never the node's.
	client = draClient([]string{"v1"})
	client.PrependReactor("list", "resourceslices", notFoundIn("v1"))
	err := newDRA(t, client, draDriver+">=1").Run(t.Context())
	require.ErrorIs(t, err, checks.ErrMisconfigured)
	assert.ErrorContains(t, err, "list resourceslices (resource.k8s.io/v1): the API server that answered does not serve it, although discovery found it")
	assert.Equal(t, 2, discoveries(client), "discovered again once, not in a loop")
}
