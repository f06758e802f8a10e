package verify

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/karpenter"
)

// createNodePool creates the NodePool and deletes it at cleanup, and with it, through
// Karpenter, its NodeClaims and nodes; cleanup waits a while for them to go, so the next
// test does not share the machine with them.
func createNodePool(t *testing.T, dyn dynamic.Interface, pool *unstructured.Unstructured) {
	t.Helper()
	_, err := dyn.Resource(karpenter.NodePools).Create(t.Context(), pool, metav1.CreateOptions{})
	require.NoError(t, err, "create NodePool %s", pool.GetName())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err := dyn.Resource(karpenter.NodePools).Delete(ctx, pool.GetName(), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cleanup: delete NodePool %s: %v", pool.GetName(), err)
			return
		}
		for ctx.Err() == nil {
			list, err := dyn.Resource(karpenter.NodeClaims).List(ctx, metav1.ListOptions{LabelSelector: karpenter.NodePoolLabel + "=" + pool.GetName()})
			if err == nil && len(list.Items) == 0 {
				return
			}
			time.Sleep(framework.PollInterval)
		}
		t.Logf("cleanup: NodeClaims of NodePool %s still there after a minute", pool.GetName())
	})
}

// deploy creates the Workload and deletes it at cleanup.
func deploy(t *testing.T, fw *framework.Framework, app, pool string, replicas int32) {
	t.Helper()
	_, err := fw.Client().AppsV1().Deployments(metav1.NamespaceDefault).Create(t.Context(), karpenter.Workload(app, pool, replicas), metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		err := fw.Client().AppsV1().Deployments(metav1.NamespaceDefault).Delete(context.Background(), app, metav1.DeleteOptions{
			PropagationPolicy: ptr.To(metav1.DeletePropagationForeground),
		})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cleanup: delete Deployment %s: %v", app, err)
		}
	})
}

// waitRunning waits until want pods of the app run, each on its own node, and returns the
// node of each.
func waitRunning(t *testing.T, fw *framework.Framework, app string, want int) map[string]string {
	t.Helper()
	var on map[string]string
	err := framework.Poll(t, func(ctx context.Context) (bool, error) {
		pods, err := fw.Client().CoreV1().Pods(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			return false, nil
		}
		on = map[string]string{}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				on[p.Name] = p.Spec.NodeName
			}
		}
		return len(on) == want, nil
	})
	require.NoError(t, err, "pods of %s running: %v, want %d", app, on, want)
	return on
}

// waitNodes waits until the timeline has seen n Nodes and returns their names.
func waitNodes(t *testing.T, tl *timeline, n int) []string {
	t.Helper()
	var nodes []string
	err := framework.Poll(t, func(context.Context) (bool, error) {
		nodes = nodes[:0]
		for _, l := range tl.Launches() {
			if l.node != "" && !l.deleted {
				nodes = append(nodes, l.node)
			}
		}
		return len(nodes) >= n, nil
	})
	require.NoError(t, err, "Karpenter launched nodes %v, want %d", nodes, n)
	return nodes
}

// claimOf returns the NodeClaim that launched the node, as the timeline saw it.
func claimOf(tl *timeline, node string) launch {
	for _, l := range tl.Launches() {
		if l.node == node {
			return l
		}
	}
	return launch{}
}

// initialized reports the status of the NodeClaim's Initialized condition ("" when absent).
func initialized(t *testing.T, dyn dynamic.Interface, claim string) string {
	t.Helper()
	u, err := dyn.Resource(karpenter.NodeClaims).Get(t.Context(), claim, metav1.GetOptions{})
	require.NoError(t, err, "get NodeClaim %s", claim)
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Initialized" {
			return fmt.Sprint(m["status"])
		}
	}
	return ""
}

// waitInitialized waits until the NodeClaim is Initialized.
func waitInitialized(t *testing.T, dyn dynamic.Interface, claim string) {
	t.Helper()
	var last string
	err := framework.Poll(t, func(ctx context.Context) (bool, error) {
		last = initialized(t, dyn, claim)
		return last == "True", nil
	})
	require.NoError(t, err, "NodeClaim %s Initialized=%q", claim, last)
}

// requireNeverHalfReleased fails t when the node was ever labelled verified while it still
// carried the startup taint, verified before Karpenter registered it, or registered without
// the startup taint (what nodeready's wait for the registration relies on).
func requireNeverHalfReleased(t *testing.T, f *framework.Fleet, tl *timeline, node string) {
	t.Helper()
	// The fleet's History knows only wellknown.StartupTaint(); the timeline knows the scenario's.
	for _, s := range f.History().States(node) {
		require.False(t, s.Labelled && s.Tainted, "node %s was labelled and tainted at once: %v", node, f.History().States(node))
	}
	l := claimOf(tl, node)
	require.False(t, l.bothAtOnce, "node %s was labelled and tainted at once", node)
	require.False(t, l.verifiedBeforeRegistered, "node %s was verified before Karpenter registered it", node)
	require.False(t, l.registeredUntainted, "node %s was registered without the startup taint: Karpenter did not merge its startupTaints at registration", node)
}
