package checks_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodeready/nodeready/checks"
	"github.com/nodeready/nodeready/internal/kube/adapt"
)

func csiNode(name string, drivers ...storagev1.CSINodeDriver) *storagev1.CSINode {
	return &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: storagev1.CSINodeSpec{Drivers: drivers}}
}

func csiDriver(name string, count *int32) storagev1.CSINodeDriver {
	d := storagev1.CSINodeDriver{Name: name, NodeID: "i-0123456789"}
	if count != nil {
		d.Allocatable = &storagev1.VolumeNodeResources{Count: count}
	}
	return d
}

func TestCSIDriver(t *testing.T) {
	tests := []struct {
		name               string
		objects            []runtime.Object
		requireAllocatable bool
		wantErr            string
	}{
		{name: "registered with a count", requireAllocatable: true,
			objects: []runtime.Object{csiNode("node-a", csiDriver("efs.csi.aws.com", nil), csiDriver("ebs.csi.aws.com", new(int32(25))))}},
		{name: "registered without a count", requireAllocatable: true,
			objects: []runtime.Object{csiNode("node-a", csiDriver("ebs.csi.aws.com", nil))},
			wantErr: "csi driver ebs.csi.aws.com: registered on node-a without an allocatable volume count"},
		{name: "registered without a count, count not required",
			objects: []runtime.Object{csiNode("node-a", csiDriver("ebs.csi.aws.com", nil))}},
		{name: "a count of 0 is set", requireAllocatable: true,
			objects: []runtime.Object{csiNode("node-a", csiDriver("ebs.csi.aws.com", new(int32(0))))}},
		{name: "other drivers only", requireAllocatable: true,
			objects: []runtime.Object{csiNode("node-a", csiDriver("efs.csi.aws.com", nil), csiDriver("fsx.csi.aws.com", nil))},
			wantErr: "csi driver ebs.csi.aws.com: not registered on node-a (CSINode lists efs.csi.aws.com, fsx.csi.aws.com)"},
		{name: "empty CSINode", requireAllocatable: true,
			objects: []runtime.Object{csiNode("node-a")},
			wantErr: "csi driver ebs.csi.aws.com: not registered on node-a (CSINode lists no driver)"},
		{name: "no CSINode", requireAllocatable: true,
			objects: []runtime.Object{csiNode("node-b", csiDriver("ebs.csi.aws.com", new(int32(25))))},
			wantErr: "csi driver ebs.csi.aws.com: not registered on node-a (no CSINode yet)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(tt.objects...)
			c := checks.NewCSIDriver(adapt.Clientset(client), "node-a", "ebs.csi.aws.com", tt.requireAllocatable)
			requireIdentity(t, c, "csi", "ebs.csi.aws.com")

			assertErr(t, checks.Execute(t.Context(), c, runTimeout).Err, tt.wantErr)
			get, ok := onlyAction(t, client).(k8stesting.GetAction)
			require.True(t, ok)
			assert.Equal(t, "csinodes", get.GetResource().Resource)
			assert.Equal(t, "node-a", get.GetName())
		})
	}
}

func TestCSIDriverWaitThenPass(t *testing.T) {
	client := fake.NewClientset()
	c := checks.NewCSIDriver(adapt.Clientset(client), "node-a", "ebs.csi.aws.com", true)

	failThenPass(t, c, "csi driver ebs.csi.aws.com: not registered on node-a (no CSINode yet)", func() {
		// The node plugin registers with the kubelet, which writes the CSINode.
		_, err := client.StorageV1().CSINodes().Create(t.Context(), csiNode("node-a", csiDriver("ebs.csi.aws.com", new(int32(25)))), metav1.CreateOptions{})
		require.NoError(t, err)
	})
}

func TestCSIDriverForbidden(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("get", "csinodes", forbidden(schema.GroupResource{Group: "storage.k8s.io", Resource: "csinodes"}))

	res := checks.Execute(t.Context(), checks.NewCSIDriver(adapt.Clientset(client), "node-a", "ebs.csi.aws.com", true), time.Second)

	require.Error(t, res.Err)
	assert.Contains(t, res.Err.Error(), `get csinode "node-a": forbidden: the csi gate needs the RBAC of manifests/gates/csi.yaml (kubectl apply -f manifests/gates/csi.yaml)`)
}

func TestValidateCSIDriverName(t *testing.T) {
	for _, name := range []string{"ebs.csi.aws.com", "pd.csi.storage.gke.io", "Disk.CSI.Azure.com", "hostpath"} {
		assert.NoError(t, checks.ValidateCSIDriverName(name), name)
	}
	for _, name := range []string{"", "ebs csi", "-ebs.csi", "a_b", strings.Repeat("a", 64)} {
		assert.Error(t, checks.ValidateCSIDriverName(name), "%q", name)
	}
}
