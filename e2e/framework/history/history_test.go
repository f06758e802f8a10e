package history_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodeready/nodeready/e2e/framework/history"
)

func node(name, rv string, labelled bool) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv, Labels: map[string]string{"pool": "x"}}}
	if labelled {
		n.Labels["verified"] = "true"
	}
	return n
}

func labelled(n *corev1.Node) bool { return n.Labels["verified"] == "true" }

// fakeNodes serves the lists in turn (the last one again) and a new hand-driven watch per
// Watch call.
func fakeNodes(t *testing.T, lists ...[]corev1.Node) (*fake.Clientset, chan *watch.FakeWatcher, *atomic.Int32) {
	t.Helper()
	client := fake.NewClientset()
	var listed atomic.Int32
	client.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		i := min(int(listed.Add(1)), len(lists)) - 1
		return true, &corev1.NodeList{ListMeta: metav1.ListMeta{ResourceVersion: "100"}, Items: lists[i]}, nil
	})
	watches := make(chan *watch.FakeWatcher, 10)
	client.PrependWatchReactor("nodes", func(k8stesting.Action) (bool, watch.Interface, error) {
		w := watch.NewFake()
		watches <- w
		return true, w, nil
	})
	return client, watches, &listed
}

func waitEntries[S any](t *testing.T, r *history.Recorder[S], name string, n int) []history.Entry[S] {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	es, err := r.Wait(ctx, name, func(es []history.Entry[S]) bool { return len(es) >= n })
	require.NoError(t, err, "entries of %s: %v", name, r.Entries(name))
	return es
}

func TestRecord(t *testing.T) {
	client, watches, listed := fakeNodes(t,
		[]corev1.Node{*node("a", "1", false), *node("b", "2", false)},
		[]corev1.Node{*node("a", "5", true)}, // after 410 Gone: b was deleted meanwhile
	)
	r, err := history.Record(t.Context(), history.Nodes(client, metav1.ListOptions{LabelSelector: "pool=x"}), labelled)
	require.NoError(t, err)
	t.Cleanup(r.Stop)
	require.Len(t, r.Entries("a"), 1, "the first list is recorded before Record returns")
	assert.Equal(t, []string{"a", "b"}, r.Names())

	var mu sync.Mutex
	var followed []string
	unfollow := r.Follow(func(name string, e history.Entry[bool]) {
		mu.Lock()
		defer mu.Unlock()
		followed = append(followed, name)
	})

	w := <-watches
	w.Modify(node("a", "3", false))
	w.Modify(node("a", "3", false)) // the same version again: not recorded twice
	w.Modify(node("a", "4", true))
	es := waitEntries(t, r, "a", 3)
	assert.Equal(t, []bool{false, false, true}, []bool{es[0].State, es[1].State, es[2].State})
	assert.True(t, es[0].Listed)
	assert.False(t, es[2].Listed)
	assert.Equal(t, int64(4), es[2].RV)
	first, ok := r.First("a", func(e history.Entry[bool]) bool { return e.State })
	require.True(t, ok)
	assert.Equal(t, es[2], first)

	w.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired})
	b := waitEntries(t, r, "b", 2)
	assert.True(t, b[1].Deleted && b[1].Listed, "b, missing from the new list, is deleted")
	es = waitEntries(t, r, "a", 4)
	assert.Equal(t, int64(5), es[3].RV)
	assert.Equal(t, 1, r.Relists())
	assert.Equal(t, int32(2), listed.Load())

	w = <-watches
	unfollow()
	w.Delete(node("a", "6", true))
	es = waitEntries(t, r, "a", 5)
	assert.True(t, es[4].Deleted)
	mu.Lock()
	assert.Equal(t, []string{"a", "b", "a", "a", "a", "b"}, followed, "replayed object by object, then as recorded, until unfollowed")
	mu.Unlock()

	r.Stop()
	r.Stop()
	assert.Len(t, r.Entries("a"), 5, "entries stay readable after Stop")
	latest, ok := r.Latest("a")
	assert.True(t, ok && latest.Deleted)
}

func TestRecordReconnects(t *testing.T) {
	client, watches, listed := fakeNodes(t, []corev1.Node{*node("a", "1", false)})
	r, err := history.Record(t.Context(), history.Nodes(client, metav1.ListOptions{}), labelled)
	require.NoError(t, err)
	t.Cleanup(r.Stop)
	w := <-watches
	w.Stop() // the connection drops: the watch resumes without a list
	w = <-watches
	w.Modify(node("a", "2", true))
	waitEntries(t, r, "a", 2)
	assert.Equal(t, int32(1), listed.Load())
	assert.Zero(t, r.Relists())
}

func TestRecordUnstructured(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodeclaims"}
	claim := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": map[string]any{"name": "c1", "resourceVersion": "7"},
	}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "NodeClaimList"}, claim)
	r, err := history.Record(t.Context(), history.From("nodeclaims", dyn.Resource(gvr), metav1.ListOptions{}),
		func(u *unstructured.Unstructured) string { return u.GetName() })
	require.NoError(t, err)
	t.Cleanup(r.Stop)
	assert.Equal(t, []history.Entry[string]{{State: "c1", RV: 7, At: r.Entries("c1")[0].At, Listed: true}}, r.Entries("c1"))
}
