package framework

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Tolerate adds tolerations to the DaemonSet kube-system/nodeready for the rest of the test,
// as a user lists a node pool's taints or another startup taint: the DaemonSet tolerates only
// the startup taint and every NoExecute taint, so an agent comes to a node with another
// NoSchedule taint only once it is listed. The DaemonSet's tolerations are put back at the end.
func (f *Framework) Tolerate(ts ...corev1.Toleration) {
	t := f.t
	t.Helper()
	ctx := t.Context()
	client := f.Client().AppsV1().DaemonSets("kube-system")
	ds, err := client.Get(ctx, "nodeready", metav1.GetOptions{})
	require.NoError(t, err)
	before := ds.Spec.Template.Spec.Tolerations
	patch := func(ctx context.Context, ts []corev1.Toleration) error {
		body, err := json.Marshal([]map[string]any{{"op": "replace", "path": "/spec/template/spec/tolerations", "value": ts}})
		if err != nil {
			return err
		}
		_, err = client.Patch(ctx, "nodeready", types.JSONPatchType, body, metav1.PatchOptions{})
		return err
	}
	t.Cleanup(func() {
		assert.NoError(t, patch(context.WithoutCancel(ctx), before), "the DaemonSet's tolerations put back")
	})
	require.NoError(t, patch(ctx, append(slices.Clone(before), ts...)))
}

// TolerateKey is Tolerate with a toleration of every taint with the key.
func (f *Framework) TolerateKey(key string) {
	f.t.Helper()
	f.Tolerate(corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists})
}
