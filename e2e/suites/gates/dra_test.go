package gates

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// testDRA: DRA_DEVICES=gpu.nodeready.example>=2 with the RBAC of manifests/gates/dra.yaml.
//   - slices of another node and of another driver are ignored, and a pool with one of its
//     two slices is incomplete: the node is held; the second slice, published late, releases it;
//   - a node whose first round sees the incomplete pool records a failure that names it;
//   - a driver that never publishes brings the failure action, here fail-open.
func testDRA(t *testing.T, fw *framework.Framework) {
	ctx, client := t.Context(), fw.Client()
	out, err := fw.KubectlContext(ctx, "apply", "-f", filepath.Join(fw.RepoRoot(), "manifests", "gates", "dra.yaml"))
	require.NoError(t, err, out)

	f := fw.NewFleet("dra")
	env := func(extra ...string) map[string]string {
		e := map[string]string{"CHECKS": baseChecks + ",dra", "DRA_DEVICES": framework.DRADriver + ">=2", "MAX_RETRIES": "2"}
		for i := 0; i < len(extra); i += 2 {
			e[extra[i]] = extra[i+1]
		}
		return e
	}
	late, incomplete, never := f.Name()+"-late", f.Name()+"-incomplete", f.Name()+"-never"

	// The incomplete pool is there before its node's agent starts.
	publish(t, client, incomplete, framework.DRADriver, incomplete, 1, 2, 2)
	require.NoError(t, f.AddNode(ctx, incomplete, framework.NodeOptions{Env: env()}))
	require.NoError(t, f.AddNode(ctx, late, framework.NodeOptions{Env: env()}))
	require.NoError(t, f.AddNode(ctx, never, framework.NodeOptions{Env: env("FAILURE_ACTION", "fail-open", "FAIL_OPEN_AFTER", "5s")}))

	// Nothing for the late node yet: its failure says so.
	cond := fw.WaitCondition(late, string(wellknown.ChecksFailed))
	assert.Contains(t, cond.Message, "dra driver "+framework.DRADriver+": no ResourceSlice for node "+late+", want 2 devices")
	cond = fw.WaitCondition(incomplete, string(wellknown.ChecksFailed))
	assert.Contains(t, cond.Message, "dra driver "+framework.DRADriver+": 0 of 2 devices on node "+incomplete+" in pools "+incomplete+
		"; incomplete, not counted: pool "+incomplete+" has 1 of 2 slices of generation 1")
	failed := fw.WaitEvent(incomplete, "CheckFailed")
	assert.Contains(t, failed.Note, "pool "+incomplete+" has 1 of 2 slices of generation 1")

	// Slices of another node and of another driver, with devices enough: ignored.
	publish(t, client, "elsewhere", framework.DRADriver, "other-node", 1, 1, 4)
	publish(t, client, late+"-fpga", "fpga.nodeready.example", late, 1, 1, 4)
	// The late node's own pool, one slice of two.
	publish(t, client, late, framework.DRADriver, late, 1, 2, 2)
	f.WaitMoreRounds(late, 2)
	fw.RequireHeld(late)
	fw.RequireHeld(incomplete)

	// The second slice of both pools, published late: both nodes are released.
	published := time.Now()
	publish(t, client, late+"-2", framework.DRADriver, late, 1, 2, 1)
	publish(t, client, incomplete+"-2", framework.DRADriver, incomplete, 1, 2, 1)
	require.NoError(t, f.WaitReleased(ctx, late, incomplete))
	t.Logf("nodes %s and %s seen released %s after their pools were complete", late, incomplete, time.Since(published).Round(time.Millisecond))
	fw.WaitCondition(late, string(wellknown.Verified))

	// The device test that can follow the gate: the API server takes the example's patch.
	out, err = fw.KubectlContext(ctx, "-n", framework.Namespace, "patch", "daemonset", framework.DaemonSetName, "--dry-run=server",
		"--patch-file", filepath.Join(fw.RepoRoot(), "examples", "gpu-smoke-test-patch.yaml"))
	require.NoError(t, err, "examples/gpu-smoke-test-patch.yaml: %s", out)

	// The driver that never publishes: held, then released by the failure action.
	cond = fw.WaitCondition(never, string(wellknown.FailedOpen))
	assert.Contains(t, cond.Message, "no ResourceSlice for node "+never)
	require.NoError(t, f.WaitAgentsGone(ctx, late, incomplete, never))
}

// publish creates a ResourceSlice of driver for node in the pool named like the node, as
// slice i of count of the pool's generation, with devices devices, and deletes it when the
// test ends.
func publish(t *testing.T, client kubernetes.Interface, name, driver, node string, generation, count int64, devices int) {
	t.Helper()
	pool := node
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   driver,
			NodeName: ptr.To(node),
			Pool:     resourcev1.ResourcePool{Name: pool, Generation: generation, ResourceSliceCount: count},
		},
	}
	for i := range devices {
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{
			Name:       fmt.Sprintf("gpu-%s-%d", name, i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"productName": {StringValue: ptr.To("Example GPU")}},
		})
	}
	_, err := client.ResourceV1().ResourceSlices().Create(t.Context(), s, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := client.ResourceV1().ResourceSlices().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("cleanup: delete resourceslice %s: %v", name, err)
		}
	})
}
