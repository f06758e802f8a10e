package checks_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodeready/nodeready/checks"
	"github.com/nodeready/nodeready/internal/kube/adapt"
)

func TestParseResourceMinimum(t *testing.T) {
	testParse(t, checks.ParseResourceMinimum, []parseCase{
		{in: "nvidia.com/gpu>=1", want: "nvidia.com/gpu>=1"},
		{in: " example.com/fpga >= 2 ", want: "example.com/fpga>=2"},
		{in: "hugepages-2Mi>=1Gi", want: "hugepages-2Mi>=1Gi"},
		{in: "memory>=0", want: "memory>=0"},
		{in: "memory>=16384Mi", want: "memory>=16Gi"},
		{in: "nvidia.com/gpu=1", wantErr: `"nvidia.com/gpu=1": want name>=quantity, such as nvidia.com/gpu>=1`},
		{in: "nvidia.com/gpu>1", wantErr: "want name>=quantity"},
		{in: "bad name!>=1", wantErr: `resource name "bad name!"`},
		{in: "a/b/c>=1", wantErr: `resource name "a/b/c"`},
		{in: "nvidia.com/gpu>=one", wantErr: `quantity "one" of nvidia.com/gpu: want a quantity such as 1, 500m or 4Gi`},
		{in: "nvidia.com/gpu>=-1", wantErr: `quantity "-1" of nvidia.com/gpu: must not be negative`},
	})
}

func nodeWithResources(capacity, allocatable corev1.ResourceList) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}
	n.Status.Capacity, n.Status.Allocatable = capacity, allocatable
	return n
}

func TestResource(t *testing.T) {
	q := resource.MustParse
	gpus := func(n string) corev1.ResourceList {
		return corev1.ResourceList{"nvidia.com/gpu": q(n), corev1.ResourceMemory: q("16Gi")}
	}
	tests := []struct {
		name    string
		node    *corev1.Node
		min     string
		wantErr string
	}{
		{name: "exactly the minimum", node: nodeWithResources(gpus("2"), gpus("2")), min: "nvidia.com/gpu>=2"},
		{name: "more than the minimum", node: nodeWithResources(gpus("8"), gpus("8")), min: "nvidia.com/gpu>=2"},
		{name: "quantities compare by value", node: nodeWithResources(gpus("1"), gpus("1")), min: "memory>=16384Mi"},
		{name: "fewer than the minimum", node: nodeWithResources(gpus("1"), gpus("1")), min: "nvidia.com/gpu>=2",
			wantErr: "node node-a: allocatable nvidia.com/gpu is 1, want at least 2"},
		{name: "fewer allocatable than capacity", node: nodeWithResources(gpus("8"), gpus("0")), min: "nvidia.com/gpu>=1",
			wantErr: "node node-a: allocatable nvidia.com/gpu is 0 (capacity 8), want at least 1"},
		{name: "not advertised", node: nodeWithResources(nil, corev1.ResourceList{corev1.ResourceCPU: q("4")}), min: "nvidia.com/gpu>=1",
			wantErr: "node node-a: no allocatable nvidia.com/gpu, want at least 1"},
		{name: "zero minimum still needs the resource", node: nodeWithResources(nil, nil), min: "example.com/fpga>=0",
			wantErr: "node node-a: no allocatable example.com/fpga, want at least 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			min := mustParse(t, checks.ParseResourceMinimum, tt.min)
			client := fake.NewClientset(tt.node)
			c := checks.NewResource(adapt.Clientset(client), "node-a", min)
			requireIdentity(t, c, "resources", min.String())

			assertErr(t, checks.Execute(t.Context(), c, runTimeout).Err, tt.wantErr)
			assert.Equal(t, "get", onlyAction(t, client).GetVerb())
		})
	}
}

func TestResourceWaitThenPass(t *testing.T) {
	node := nodeWithResources(nil, nil)
	client := fake.NewClientset(node)
	c := checks.NewResource(adapt.Clientset(client), "node-a", mustParse(t, checks.ParseResourceMinimum, "nvidia.com/gpu>=1"))

	failThenPass(t, c, "node node-a: no allocatable nvidia.com/gpu, want at least 1", func() {
		// The device plugin registers; the kubelet advertises its devices.
		node.Status.Capacity = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
		node.Status.Allocatable = node.Status.Capacity
		updateNodeStatus(t, client, node)
	})
}
