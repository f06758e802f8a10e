package gates

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourcev1beta1 "k8s.io/api/resource/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/controlplane"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// TestDRAGateOnV1beta1: Kubernetes 1.32 with Dynamic Resource Allocation turned on serves
// resource.k8s.io/v1beta1 only; the dra gate reads it there.
func TestDRAGateOnV1beta1(t *testing.T) {
	fw := framework.New(t, framework.Options{Kubernetes: framework.OldestKubernetes, Cluster: framework.ClusterOptions{
		ControlPlane: controlplane.Options{APIServerArgs: []string{
			"--feature-gates=DynamicResourceAllocation=true", "--runtime-config=resource.k8s.io/v1beta1=true"}}}})
	f, node := fw.NewDRANode("drabeta", framework.DRADriver+"[productName=Example GPU]>=1")
	cond := fw.WaitCondition(node, string(wellknown.ChecksFailed))
	assert.Contains(t, cond.Message, "no ResourceSlice for node "+node)

	_, err := fw.Client().ResourceV1beta1().ResourceSlices().Create(t.Context(), &resourcev1beta1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node},
		Spec: resourcev1beta1.ResourceSliceSpec{Driver: framework.DRADriver, NodeName: node,
			Pool: resourcev1beta1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			Devices: []resourcev1beta1.Device{{Name: "gpu-0", Basic: &resourcev1beta1.BasicDevice{
				Attributes: map[resourcev1beta1.QualifiedName]resourcev1beta1.DeviceAttribute{"productName": {StringValue: ptr.To("Example GPU")}}}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, f.WaitReleased(t.Context(), node))
}
