package versions

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourcev1beta1 "k8s.io/api/resource/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodeready/nodeready/e2e/framework/controlplane"
	"github.com/nodeready/nodeready/e2e/framework/harness"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// startOldest starts a cluster of the oldest supported release, whatever release the run
// chose for the other suites, with extra API server flags.
func startOldest(t *testing.T, apiServerArgs ...string) *harness.Cluster {
	t.Helper()
	bin, err := controlplane.BinDirFor(controlplane.FloorKubernetesVersion)
	require.NoError(t, err)
	c := harness.StartForTest(t, harness.Options{ControlPlane: controlplane.Options{BinDir: bin, APIServerArgs: apiServerArgs}})
	require.Equal(t, controlplane.FloorKubernetesVersion, c.KubernetesVersion(), "the API server's version")
	return c
}

// TestOldestRelease: what Kubernetes 1.32 refuses or lacks, on a control plane of that
// release with manifests/ installed. Everything else runs there as on the newer releases, in
// the same tests (make e2e-versions).
func TestOldestRelease(t *testing.T) {
	c := startOldest(t)

	// 1.32 has MutatingAdmissionPolicy only as v1alpha1, off by default: kubectl refuses
	// the taint-at-creation and the label-to-taint policies for their kind, and stores nothing.
	t.Run("kubectl refuses the creation-time taint and label-to-taint policies", func(t *testing.T) {
		labelToTaint := filepath.Join(c.RepoRoot(), "manifests", "label-to-taint")
		out, err := c.Kubectl(t.Context(), "apply", "--dry-run=server", "-f", labelToTaint)
		require.Error(t, err, "kubectl apply of %s: %s", labelToTaint, out)
		assert.Contains(t, out, `no matches for kind "MutatingAdmissionPolicy" in version "admissionregistration.k8s.io/v1"`)

		file := filepath.Join(c.RepoRoot(), "manifests", "node-creation", "startup-taint.yaml")
		out, err = c.Kubectl(t.Context(), "apply", "-f", file)
		require.Error(t, err, "kubectl apply of %s: %s", file, out)
		assert.Contains(t, out, `no matches for kind "MutatingAdmissionPolicy" in version "admissionregistration.k8s.io/v1"`)
	})

	// DRA is off by default on 1.32, so no resource.k8s.io version is served: a node with
	// the dra gate is held, and its condition says why in one message.
	t.Run("the dra gate holds the node: no resource.k8s.io version is served", func(t *testing.T) {
		_, node := draNode(t, c, "dra", draDriver+">=1")
		cond := harness.RequireAgentCondition(t, c, node, string(wellknown.ChecksFailed))
		assert.Contains(t, cond.Message, "the API server serves no resource.k8s.io version nodeready reads (v1, v1beta1)")
		assert.True(t, harness.IsTainted(harness.RequireNode(t, c, node)), "held")
	})
}

// draDriver is a stand-in DRA driver whose ResourceSlices the tests write.
const draDriver = "gpu.nodeready.example"

// draNode installs the dra gate's RBAC and adds a node of a new fleet whose agent runs the
// gate with DRA_DEVICES=devices.
func draNode(t *testing.T, c *harness.Cluster, fleet, devices string) (*harness.Fleet, string) {
	t.Helper()
	out, err := c.Kubectl(t.Context(), "apply", "-f", filepath.Join(c.RepoRoot(), "manifests", "gates", "dra.yaml"))
	require.NoError(t, err, out)
	return harness.NewFleetWithNodeForTest(t, c, fleet, harness.NodeOptions{Env: map[string]string{
		"CHECKS": "dns,tcp,apiserver,endpoints,dra", "DRA_DEVICES": devices, "MAX_RETRIES": "1"}})
}

// TestDRAGateOnV1beta1: Kubernetes 1.32 with Dynamic Resource Allocation turned on serves
// resource.k8s.io/v1beta1 only; the dra gate reads it there.
func TestDRAGateOnV1beta1(t *testing.T) {
	c := startOldest(t, "--feature-gates=DynamicResourceAllocation=true", "--runtime-config=resource.k8s.io/v1beta1=true")
	f, node := draNode(t, c, "drabeta", draDriver+"[productName=Example GPU]>=1")
	cond := harness.RequireAgentCondition(t, c, node, string(wellknown.ChecksFailed))
	assert.Contains(t, cond.Message, "no ResourceSlice for node "+node)

	_, err := c.Client().ResourceV1beta1().ResourceSlices().Create(t.Context(), &resourcev1beta1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node},
		Spec: resourcev1beta1.ResourceSliceSpec{Driver: draDriver, NodeName: node,
			Pool: resourcev1beta1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			Devices: []resourcev1beta1.Device{{Name: "gpu-0", Basic: &resourcev1beta1.BasicDevice{
				Attributes: map[resourcev1beta1.QualifiedName]resourcev1beta1.DeviceAttribute{"productName": {StringValue: ptr.To("Example GPU")}}}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, f.WaitReleased(t.Context(), node))
}
