package checks_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodeready/nodeready/checks"
)

func TestParseResourceMinimum(t *testing.T) {
	tests := []struct {
		in      string
		want    string // String() of the result
		wantErr string
	}{
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
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := checks.ParseResourceMinimum(tt.in)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got.String())
		})
	}
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
			min, err := checks.ParseResourceMinimum(tt.min)
			require.NoError(t, err)
			client := fake.NewClientset(tt.node)
			c := checks.NewResource(client, "node-a", min)
			require.Equal(t, "resources", c.Name())
			require.Equal(t, min.String(), c.Target())

			res := checks.Execute(t.Context(), c, 5*time.Second)

			if tt.wantErr == "" {
				assert.NoError(t, res.Err)
			} else {
				require.Error(t, res.Err)
				assert.Equal(t, tt.wantErr, res.Err.Error())
			}
			require.Len(t, client.Actions(), 1)
			assert.Equal(t, "get", client.Actions()[0].GetVerb())
		})
	}
}

func TestResourceWaitThenPass(t *testing.T) {
	node := nodeWithResources(nil, nil)
	client := fake.NewClientset(node)
	min, err := checks.ParseResourceMinimum("nvidia.com/gpu>=1")
	require.NoError(t, err)
	c := checks.NewResource(client, "node-a", min)

	res := checks.Execute(t.Context(), c, 5*time.Second)
	require.Error(t, res.Err)
	assert.Equal(t, "node node-a: no allocatable nvidia.com/gpu, want at least 1", res.Err.Error())

	// The device plugin registers; the kubelet advertises its devices.
	node.Status.Capacity = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	node.Status.Allocatable = node.Status.Capacity
	_, err = client.CoreV1().Nodes().UpdateStatus(t.Context(), node, metav1.UpdateOptions{})
	require.NoError(t, err)

	res = checks.Execute(t.Context(), c, 5*time.Second)
	assert.NoError(t, res.Err)
}
