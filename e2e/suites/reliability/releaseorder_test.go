package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/internal/kube/adapt"
	"github.com/nodeready/nodeready/internal/wellknown"
	"github.com/nodeready/nodeready/nodepatch"
)

// TestReleaseTestsItsCondition proves on the real API server what the release's one round
// trip rests on: the write of the node (label and taint) carries a JSON Patch test of the
// condition, which the API server applies to the node as stored, status included, before the
// node's strategy resets the status of a write to the node. So that write is refused (422,
// nothing changed) while the condition is not stored, and lands once it is; and the release,
// both writes sent at once, leaves no version of the node labelled with a condition that
// says otherwise.
func TestReleaseTestsItsCondition(t *testing.T) {
	fw := framework.New(t, framework.Options{ControlPlaneOnly: true})
	client := fw.ControlPlane().Client()
	ctx := t.Context()
	t.Logf("Kubernetes %s", fw.KubernetesVersion())
	create := func(name string) {
		t.Helper()
		res := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110")}
		now := metav1.Now()
		_, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"e2e": "release-order"}},
			Spec:       corev1.NodeSpec{Taints: []corev1.Taint{wellknown.StartupTaint()}},
			Status: corev1.NodeStatus{Capacity: res, Allocatable: res, Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}) })
		// The API server's TaintNodesByCondition admission adds node.kubernetes.io/not-ready to a
		// new node and the controller manager's node lifecycle controller takes it off once it
		// sees the Ready condition, whenever it gets to it: the writes below test the taints as
		// read, so they start from the node with only its startup taint.
		require.NoError(t, framework.Poll(t, func(ctx context.Context) (bool, error) {
			n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return len(n.Spec.Taints) == 1 && n.Spec.Taints[0].Key == wellknown.TaintKey, nil
		}), "node %s keeps a taint besides the startup taint", name)
	}

	t.Run("the label's write waits for the condition", func(t *testing.T) {
		const name = "order-test"
		create(name)
		// The condition's place once it is appended, and the taints as they are.
		labelAt := func(n *corev1.Node, at int) []byte {
			path := fmt.Sprintf("/status/conditions/%d/", at)
			label, err := json.Marshal([]map[string]any{
				{"op": "test", "path": path + "type", "value": wellknown.ConditionType},
				{"op": "test", "path": path + "status", "value": "True"},
				{"op": "test", "path": path + "reason", "value": "Verified"},
				{"op": "test", "path": "/spec/taints", "value": n.Spec.Taints},
				{"op": "replace", "path": "/spec/taints", "value": []corev1.Taint{}},
				{"op": "add", "path": "/metadata/labels/node-ready~1verified", "value": "true"},
			})
			require.NoError(t, err)
			return label
		}
		before, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		_, err = client.CoreV1().Nodes().Patch(ctx, name, types.JSONPatchType, labelAt(before, len(before.Status.Conditions)), metav1.PatchOptions{})
		require.Error(t, err)
		assert.True(t, apierrors.IsInvalid(err), "refused as a failed test (422): %v", err)
		after, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		// Not the resourceVersion: the controller manager writes a new node on its own (its TTL
		// controller annotates it) whenever it gets to it.
		assert.Equal(t, before.Labels, after.Labels, "the refused write labelled the node")
		assert.Equal(t, before.Spec.Taints, after.Spec.Taints, "the refused write changed the taints")

		status, err := json.Marshal([]map[string]any{{"op": "add", "path": "/status/conditions/-", "value": corev1.NodeCondition{
			Type: wellknown.ConditionType, Status: corev1.ConditionTrue, Reason: "Verified", Message: "checks passed",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}})
		require.NoError(t, err)
		stored, err := client.CoreV1().Nodes().Patch(ctx, name, types.JSONPatchType, status, metav1.PatchOptions{}, "status")
		require.NoError(t, err)
		at := len(before.Status.Conditions)
		require.Len(t, stored.Status.Conditions, at+1)
		require.Equal(t, wellknown.ConditionType, stored.Status.Conditions[at].Type, "the condition appended where the write tests it")
		n, err := client.CoreV1().Nodes().Patch(ctx, name, types.JSONPatchType, labelAt(stored, at), metav1.PatchOptions{})
		require.NoError(t, err, "the write refused with the condition stored")
		assert.Equal(t, "true", n.Labels[wellknown.VerifiedLabel])
		assert.Empty(t, n.Spec.Taints)
		assert.Equal(t, stored.Status.Conditions, n.Status.Conditions, "the status is the stored one")
	})

	t.Run("no version labelled with another condition", func(t *testing.T) {
		w, err := client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{LabelSelector: "e2e=release-order"})
		require.NoError(t, err)
		var (
			mu        sync.Mutex
			disagreed []string
			done      = make(chan struct{})
		)
		go func() {
			defer close(done)
			for ev := range w.ResultChan() {
				n, ok := ev.Object.(*corev1.Node)
				if !ok || ev.Type == watch.Deleted {
					continue
				}
				if _, labelled := n.Labels[wellknown.VerifiedLabel]; !labelled {
					continue
				}
				if c := verdictOf(n); c == nil || c.Status != corev1.ConditionTrue || c.Reason != string(wellknown.Verified) {
					mu.Lock()
					disagreed = append(disagreed, fmt.Sprintf("%s rv %s: %+v", n.Name, n.ResourceVersion, c))
					mu.Unlock()
				}
			}
		}()
		spec := nodepatch.Spec{Taints: []corev1.Taint{wellknown.StartupTaint()}, LabelKey: wellknown.VerifiedLabel, LabelValue: "true"}
		const runs = 20
		var took []time.Duration
		for i := range runs {
			name := fmt.Sprintf("order-%d", i)
			create(name)
			p := nodepatch.New(adapt.Clientset(client), name, spec)
			if i%2 == 1 {
				// A node whose condition says otherwise first, as after a refused release.
				_, err := p.Withdraw(ctx, wellknown.Condition{Status: corev1.ConditionFalse, Reason: wellknown.Misconfigured, Message: "release: refused"})
				require.NoError(t, err)
			}
			start := time.Now()
			outcome, err := p.ReleaseWith(ctx, wellknown.Condition{Status: corev1.ConditionTrue, Reason: wellknown.Verified, Message: "All 1 checks passed"}, nil)
			took = append(took, time.Since(start))
			require.NoError(t, err)
			assert.Equal(t, nodepatch.Patched, outcome)
			n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			require.NoError(t, err)
			assert.True(t, p.Verified(n))
			assert.Equal(t, string(wellknown.Verified), verdictOf(n).Reason)
			assert.Len(t, n.Status.Conditions, 2, "the kubelet's condition kept")
		}
		time.Sleep(time.Second) // the watch's last events
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		assert.Empty(t, disagreed, "versions labelled with a condition that says otherwise")
		t.Logf("%d releases, each %v", runs, took)
	})
}

// verdictOf returns the node's condition node-ready/Verified, or nil.
func verdictOf(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == wellknown.ConditionType {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}
