package nodepatch

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodeready/nodeready/internal/kube/adapt"
	"github.com/nodeready/nodeready/internal/wellknown"
)

const nodeName = "node-a"

var (
	startup   = corev1.Taint{Key: "node-ready/unverified", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	foreign   = corev1.Taint{Key: "example.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}
	notReady  = corev1.Taint{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC).Local()}}
	otherEff  = corev1.Taint{Key: "node-ready/unverified", Value: "true", Effect: corev1.TaintEffectNoExecute}
	spec      = Spec{Taints: []corev1.Taint{startup}, LabelKey: "node-ready/verified", LabelValue: "true"}
	nodeGVR   = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	fastRetry = wait.Backoff{Steps: 8, Duration: 0}
)

func newNode(labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName, ResourceVersion: "1", Labels: labels, Annotations: map[string]string{"example.com/owner": "team-a"}},
		Spec:       corev1.NodeSpec{Taints: taints},
	}
}

func newPatcher(t *testing.T, node *corev1.Node) (*Patcher, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset(node)
	// The API server answers a failed JSON Patch test with 422 Invalid, and
	// gives every write (of the status too) a new resourceVersion; the fake's tracker answers with
	// a plain error and keeps the resourceVersion.
	tracker := k8stesting.ObjectReaction(client.Tracker())
	var rv atomic.Int64
	rv.Store(1)
	client.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		handled, obj, err := tracker(a)
		if err != nil && (strings.Contains(err.Error(), "test failed") || strings.Contains(err.Error(), "test operation") || strings.Contains(err.Error(), "error in test")) {
			err = apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "patch", corev1.Resource("nodes"), nodeName, err.Error(), 0, false)
		}
		if n, ok := obj.(*corev1.Node); ok && err == nil {
			n = n.DeepCopy()
			n.ResourceVersion = strconv.FormatInt(rv.Add(1), 10)
			if err := client.Tracker().Update(nodeGVR, n, ""); err != nil {
				return true, nil, err
			}
			obj = n
		}
		return handled, obj, err
	})
	p := New(adapt.Clientset(client), nodeName, spec)
	p.backoff = fastRetry
	return p, client
}

func getNode(t *testing.T, client *fake.Clientset) *corev1.Node {
	t.Helper()
	n, err := client.Tracker().Get(nodeGVR, "", nodeName)
	require.NoError(t, err)
	return n.(*corev1.Node)
}

// verbs lists the verbs of the recorded actions, in order.
func verbs(client *fake.Clientset) []string {
	var out []string
	for _, a := range client.Actions() {
		out = append(out, a.GetVerb())
	}
	return out
}

// putNode stores n as another writer of the node would.
func putNode(t *testing.T, client *fake.Clientset, n *corev1.Node) {
	t.Helper()
	require.NoError(t, client.Tracker().Update(nodeGVR, n, ""))
}

// retaint stores n, as read, with the startup taint back, as a writer that merges an old
// taint list back would.
func retaint(t *testing.T, client *fake.Clientset, n *corev1.Node) {
	t.Helper()
	n.Spec.Taints = append(n.Spec.Taints, startup)
	putNode(t, client, n)
}

// released is a patcher whose node has been released once.
func released(t *testing.T, node *corev1.Node) (*Patcher, *fake.Clientset) {
	t.Helper()
	p, client := newPatcher(t, node)
	_, err := p.Release(t.Context(), nil)
	require.NoError(t, err)
	return p, client
}

// watching starts p's watch of the node for the rest of the test and waits until it shows
// the node.
func watching(t *testing.T, p *Patcher, client *fake.Clientset) {
	t.Helper()
	t.Cleanup(p.Watch(t.Context()))
	// Until the watch shows the node, State reads it instead: wait for the watch, so that
	// the requests a test counts afterwards are its own. The node is in the store once the
	// list (a GET) returns, before the reflector calls WATCH: wait for that call too, which
	// the fake records under the lock it registers the watcher under, so no later write is
	// missed by the watch.
	require.Eventually(t, func() bool {
		_, ok, _ := p.view.store.GetByKey(nodeName)
		return ok && countVerb(client, "watch") > 0
	}, 5*time.Second, time.Millisecond, "the watch shows the node")
	_, err := p.State(t.Context())
	require.NoError(t, err)
}

// countVerb counts the recorded actions of verb.
func countVerb(client *fake.Clientset, verb string) int {
	n := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == verb {
			n++
		}
	}
	return n
}

func TestReleaseKeepsEverythingElse(t *testing.T) {
	tests := []struct {
		name       string
		node       *corev1.Node
		wantTaints []corev1.Taint
		wantLabels map[string]string
		want       Outcome
		wantVerbs  []string
	}{
		{
			name:       "taint removed, label added, foreign taints and labels kept",
			node:       newNode(map[string]string{"pool": "gpu"}, foreign, startup, notReady),
			wantTaints: []corev1.Taint{foreign, notReady},
			wantLabels: map[string]string{"pool": "gpu", "node-ready/verified": "true"},
			want:       Patched,
			wantVerbs:  []string{"get", "patch"},
		},
		{
			name:       "already verified node is not written",
			node:       newNode(map[string]string{"pool": "gpu", "node-ready/verified": "true"}, foreign),
			wantTaints: []corev1.Taint{foreign},
			wantLabels: map[string]string{"pool": "gpu", "node-ready/verified": "true"},
			want:       Unchanged,
			wantVerbs:  []string{"get"},
		},
		{
			name:       "node without the taint still gets the label",
			node:       newNode(map[string]string{"pool": "gpu"}, foreign),
			wantTaints: []corev1.Taint{foreign},
			wantLabels: map[string]string{"pool": "gpu", "node-ready/verified": "true"},
			want:       Patched,
			wantVerbs:  []string{"get", "patch"},
		},
		{
			name:       "labelled node loses only the taint",
			node:       newNode(map[string]string{"node-ready/verified": "true"}, startup),
			wantTaints: []corev1.Taint{},
			wantLabels: map[string]string{"node-ready/verified": "true"},
			want:       Patched,
			wantVerbs:  []string{"get", "patch"},
		},
		{
			name:       "label with another value is set to the configured one",
			node:       newNode(map[string]string{"node-ready/verified": "false"}),
			wantLabels: map[string]string{"node-ready/verified": "true"},
			want:       Patched,
			wantVerbs:  []string{"get", "patch"},
		},
		{
			name:       "same key with another effect is not ours and stays",
			node:       newNode(nil, otherEff, startup),
			wantTaints: []corev1.Taint{otherEff},
			wantLabels: map[string]string{"node-ready/verified": "true"},
			want:       Patched,
			wantVerbs:  []string{"get", "patch"},
		},
		{
			name:       "duplicate startup taints are all removed",
			node:       newNode(map[string]string{"pool": "a"}, startup, foreign, corev1.Taint{Key: startup.Key, Value: "other", Effect: startup.Effect}),
			wantTaints: []corev1.Taint{foreign},
			wantLabels: map[string]string{"pool": "a", "node-ready/verified": "true"},
			want:       Patched,
			wantVerbs:  []string{"get", "patch"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, client := newPatcher(t, tt.node)
			got, err := p.Release(t.Context(), nil)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.wantVerbs, verbs(client))

			n := getNode(t, client)
			assert.Equal(t, tt.wantLabels, n.Labels)
			assert.ElementsMatch(t, tt.wantTaints, n.Spec.Taints)
			assert.Equal(t, map[string]string{"example.com/owner": "team-a"}, n.Annotations)
			assert.True(t, p.Verified(n))
		})
	}
}

func TestPlanLocksTaintsWithTest(t *testing.T) {
	p := New(nil, nodeName, spec)
	node := newNode(map[string]string{"a": "b"}, foreign, startup)
	var ops []operation
	require.NoError(t, json.Unmarshal(p.plan(node, p.spec.LabelValue, nil), &ops))
	require.Len(t, ops, 3)
	assert.Equal(t, "test", ops[0].Op)
	assert.Equal(t, "/spec/taints", ops[0].Path)
	assert.Len(t, ops[0].Value, 2, "the test carries the whole list as read")
	assert.Equal(t, "replace", ops[1].Op)
	assert.Equal(t, "/metadata/labels/node-ready~1verified", ops[2].Path)

	// No labels at all: the map is created under a resourceVersion test.
	node = newNode(nil)
	node.ResourceVersion = "42"
	require.NoError(t, json.Unmarshal(p.plan(node, p.spec.LabelValue, nil), &ops))
	require.Len(t, ops, 2)
	assert.Equal(t, operation{Op: "test", Path: "/metadata/resourceVersion", Value: "42"}, ops[0])
	assert.Equal(t, "/metadata/labels", ops[1].Path)
}

// failPatches makes the first n patches fail with err, after letting a
// concurrent writer change the node (as the lost race would).
func failPatches(client *fake.Clientset, n int, err error, concurrent func(*corev1.Node)) *int {
	calls := 0
	client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		calls++
		if calls > n {
			return false, nil, nil
		}
		if concurrent != nil {
			obj, _ := client.Tracker().Get(nodeGVR, "", nodeName)
			node := obj.(*corev1.Node).DeepCopy()
			concurrent(node)
			_ = client.Tracker().Update(nodeGVR, node, "")
		}
		return true, nil, err
	})
	return &calls
}

func TestReleaseRetriesLostLocks(t *testing.T) {
	gr := schema.GroupResource{Resource: "nodes"}
	tests := map[string]error{
		"409 conflict":          apierrors.NewConflict(gr, nodeName, nil),
		"422 failed patch test": apierrors.NewInvalid(schema.GroupKind{Kind: "Node"}, nodeName, nil),
	}
	for name, apiErr := range tests {
		t.Run(name, func(t *testing.T) {
			p, client := newPatcher(t, newNode(map[string]string{"pool": "a"}, startup))
			addTaint := func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, foreign) }
			calls := failPatches(client, 2, apiErr, addTaint)

			got, err := p.Release(t.Context(), nil)
			require.NoError(t, err)
			assert.Equal(t, Patched, got)
			assert.Equal(t, 3, *calls, "two lost locks, then the write")
			assert.Equal(t, []string{"get", "patch", "get", "patch", "get", "patch"}, verbs(client),
				"every retry starts from a fresh read")

			n := getNode(t, client)
			assert.Equal(t, []corev1.Taint{foreign, foreign}, n.Spec.Taints, "the concurrent writers' taints survive")
			assert.Equal(t, "true", n.Labels["node-ready/verified"])
		})
	}
}

func TestReleaseGivesUpOnPermanentErrors(t *testing.T) {
	gr := schema.GroupResource{Resource: "nodes"}
	t.Run("403 is reported and not spun on", func(t *testing.T) {
		p, client := newPatcher(t, newNode(nil, startup))
		calls := failPatches(client, 100, apierrors.NewForbidden(gr, nodeName, assert.AnError), nil)
		_, err := p.Release(t.Context(), nil)
		require.ErrorIs(t, err, ErrForbidden)
		assert.Contains(t, err.Error(), "ClusterRole")
		assert.Equal(t, 1, *calls)
		assert.Equal(t, []corev1.Taint{startup}, getNode(t, client).Spec.Taints, "nothing written")
	})
	t.Run("deleted node", func(t *testing.T) {
		p, client := newPatcher(t, newNode(nil, startup))
		require.NoError(t, client.Tracker().Delete(nodeGVR, "", nodeName))
		_, err := p.Release(t.Context(), nil)
		require.ErrorIs(t, err, ErrNodeNotFound)
		assert.Equal(t, []string{"get"}, verbs(client))
	})
	t.Run("lock lost on every attempt ends after the backoff", func(t *testing.T) {
		p, client := newPatcher(t, newNode(nil, startup))
		calls := failPatches(client, 100, apierrors.NewConflict(gr, nodeName, nil), nil)
		_, err := p.Release(t.Context(), nil)
		require.True(t, apierrors.IsConflict(err), "got %v", err)
		assert.Equal(t, fastRetry.Steps, *calls)
	})
}

func TestReleaseConfirmsFromThePatchAnswer(t *testing.T) {
	// The API server answers the write with the node as stored. Here an
	// admission plugin kept the taint: the answer shows it, and the release
	// is done again from a fresh read. No read-back follows a good answer.
	p, client := newPatcher(t, newNode(map[string]string{"pool": "a"}, startup))
	patches := 0
	client.PrependReactor("patch", "nodes", func(action k8stesting.Action) (bool, runtime.Object, error) {
		patches++
		if patches == 1 {
			return true, getNode(t, client), nil // stored as it was: still tainted
		}
		return false, nil, nil
	})
	got, err := p.Release(t.Context(), nil)
	require.NoError(t, err)
	assert.Equal(t, Patched, got)
	assert.Equal(t, 2, patches)
	assert.Equal(t, []string{"get", "patch", "get", "patch"}, verbs(client))
	assert.True(t, p.Verified(getNode(t, client)))
}

func TestReleaseHonoursContext(t *testing.T) {
	p, client := newPatcher(t, newNode(nil, startup))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	client.PrependReactor("*", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, ctx.Err()
	})
	_, err := p.Release(ctx, nil)
	require.ErrorIs(t, err, context.Canceled)
}

func TestReleaseWaitsForKarpenterRegistration(t *testing.T) {
	p, client := newPatcher(t, newNode(map[string]string{"karpenter.sh/nodepool": "default"}, startup))
	_, err := p.Release(t.Context(), nil)
	require.ErrorIs(t, err, ErrNotRegistered)
	assert.Equal(t, []string{"get"}, verbs(client), "no write before registration")

	n := getNode(t, client)
	n.Labels["karpenter.sh/registered"] = "true"
	putNode(t, client, n)
	got, err := p.Release(t.Context(), nil)
	require.NoError(t, err)
	assert.Equal(t, Patched, got)
}

func TestSettleReleasesAgainWhenTheTaintComesBack(t *testing.T) {
	p, client := released(t, newNode(map[string]string{"pool": "a"}, startup, foreign))

	done := settleInBackground(t, p, client)
	// The startup taint is merged back right after the release.
	retaint(t, client, getNode(t, client))

	r := <-done
	require.NoError(t, r.err)
	assert.Equal(t, 1, r.again)
	n := getNode(t, client)
	assert.True(t, p.Verified(n), "the taint is gone again at the end of the window")
	assert.Equal(t, []corev1.Taint{foreign}, n.Spec.Taints)
}

// TestSettleLabelsAgainWhenTheLabelGoes: within the window a removed label is put back, as a
// returning taint is removed (README: SETTLE_TIME); a re-verification waits for the agent to exit.
func TestSettleLabelsAgainWhenTheLabelGoes(t *testing.T) {
	p, client := released(t, newNode(map[string]string{"pool": "a"}, startup, foreign))

	done := settleInBackground(t, p, client)
	n := getNode(t, client)
	delete(n.Labels, "node-ready/verified")
	putNode(t, client, n)

	r := <-done
	require.NoError(t, r.err)
	assert.Equal(t, 1, r.again)
	n = getNode(t, client)
	assert.Equal(t, "true", n.Labels["node-ready/verified"], "labelled again at the end of the window")
	assert.Equal(t, []corev1.Taint{foreign}, n.Spec.Taints)
}

// TestFailOpenSaysSoInTheLabel: a release with failing checks sets the verified label to
// failed-open in the same write that removes the startup taint, keeps every other taint and
// label, counts as released, and a taint that comes back is removed again with the same
// label value.
func TestFailOpenSaysSoInTheLabel(t *testing.T) {
	p, client := newPatcher(t, newNode(map[string]string{"pool": "a"}, startup, foreign))
	outcome, err := p.FailOpen(t.Context(), nil)
	require.NoError(t, err)
	assert.Equal(t, Patched, outcome)
	n := getNode(t, client)
	assert.Equal(t, map[string]string{"pool": "a", "node-ready/verified": wellknown.FailedOpenValue}, n.Labels)
	assert.Equal(t, []corev1.Taint{foreign}, n.Spec.Taints)
	assert.True(t, p.Verified(n), "released")
	assert.Equal(t, 1, countVerb(client, "patch"), "label and taint in one write")

	done := settleInBackground(t, p, client)
	retaint(t, client, n)
	r := <-done
	require.NoError(t, r.err)
	assert.Equal(t, 1, r.again)
	assert.Equal(t, wellknown.FailedOpenValue, getNode(t, client).Labels["node-ready/verified"], "released again as failed open")
}

// TestSettleCountsReleasesNotEvents: two watch events that show the taint
// back before the agent has removed it again are one release again, not two.
func TestSettleCountsReleasesNotEvents(t *testing.T) {
	p, client := released(t, newNode(map[string]string{"pool": "a"}, startup, foreign))

	patching, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		once.Do(func() {
			close(patching)
			<-proceed
		})
		return false, nil, nil
	})
	done := settleInBackground(t, p, client)

	retaint(t, client, getNode(t, client))
	<-patching // releasing the node again
	// Another writer changes the node while the taint is still there.
	n := getNode(t, client)
	n.Labels["pool"] = "b"
	putNode(t, client, n)
	close(proceed)

	r := <-done
	require.NoError(t, r.err)
	assert.Equal(t, 1, r.again, "released again once")
	n = getNode(t, client)
	assert.True(t, p.Verified(n))
	assert.Equal(t, "b", n.Labels["pool"])
}

func TestSettleQuietWindow(t *testing.T) {
	p, _ := newPatcher(t, newNode(nil, startup))
	_, err := p.Settle(t.Context(), time.Second)
	require.Error(t, err, "settle needs a release first")
	_, err = p.Release(t.Context(), nil)
	require.NoError(t, err)
	again, err := p.Settle(t.Context(), 100*time.Millisecond)
	require.NoError(t, err)
	assert.Zero(t, again)
	again, err = p.Settle(t.Context(), 0)
	require.NoError(t, err)
	assert.Zero(t, again)
}

// TestSettleWatchesAgainWhenTheWatchEnds: after a long outage the watch can
// end with 410 Gone. The node is listed again (and released, since the taint
// came back meanwhile) and watched anew. The window outlasts the informer's
// first backoff (at most 1.6 s) before it lists again.
func TestSettleWatchesAgainWhenTheWatchEnds(t *testing.T) {
	p, client := released(t, newNode(map[string]string{"pool": "a"}, startup, foreign))

	var watches atomic.Int32
	client.PrependWatchReactor("nodes", func(k8stesting.Action) (bool, watch.Interface, error) {
		if watches.Add(1) > 1 {
			return false, nil, nil
		}
		// The taint comes back unseen, then the watch is gone.
		retaint(t, client, getNode(t, client))
		gone := watch.NewFakeWithChanSize(1, false)
		gone.Error(&metav1.Status{Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired})
		return true, gone, nil
	})
	again, err := p.Settle(t.Context(), 3*time.Second)
	require.NoError(t, err)
	assert.Equal(t, 1, again, "released again after the watch ended")
	assert.Equal(t, int32(2), watches.Load(), "watched anew")
	n := getNode(t, client)
	assert.True(t, p.Verified(n))
	assert.Equal(t, []corev1.Taint{foreign}, n.Spec.Taints)
}

// TestSettleReadsAtTheEndWhenTheWatchIsDown: a watch that is down when the
// window closes cannot vouch for the node; it is read once more, and
// released again since the taint came back unseen.
func TestSettleReadsAtTheEndWhenTheWatchIsDown(t *testing.T) {
	p, client := released(t, newNode(map[string]string{"pool": "a"}, startup, foreign))

	client.PrependWatchReactor("nodes", func(k8stesting.Action) (bool, watch.Interface, error) {
		if n := getNode(t, client); !p.hasTaint(n) {
			retaint(t, client, n)
		}
		return true, nil, apierrors.NewServiceUnavailable("down")
	})
	again, err := p.Settle(t.Context(), 300*time.Millisecond)
	require.NoError(t, err)
	assert.Equal(t, 1, again, "released again by the read at the end of the window")
	assert.True(t, p.Verified(getNode(t, client)))
}

// TestReleaseFromTheWatch: with the node watched, the release reads nothing
// of its own: its one request is the PATCH, planned from the node the watch
// shows, and the settle window adds none. (The fake clientset cannot stream lists, so its informer lists the
// node with a GET first; the API server answers one WATCH instead.)
func TestReleaseFromTheWatch(t *testing.T) {
	p, client := newPatcher(t, newNode(map[string]string{"pool": "a"}, startup, foreign))
	watching(t, p, client)
	before := len(client.Actions())
	outcome, err := p.Release(t.Context(), map[string]string{"node-ready/verified-at": "now"})
	require.NoError(t, err)
	assert.Equal(t, Patched, outcome)
	assert.Equal(t, []string{"patch"}, verbs(client)[before:])
	assert.Equal(t, []string{"get", "watch"}, verbs(client)[:before])
	// The settle window follows the same watch: no request of its own.
	again, err := p.Settle(t.Context(), 100*time.Millisecond)
	require.NoError(t, err)
	assert.Zero(t, again)
	assert.Equal(t, []string{"get", "watch", "patch"}, verbs(client))
	n := getNode(t, client)
	assert.True(t, p.Verified(n))
	assert.Equal(t, []corev1.Taint{foreign}, n.Spec.Taints)
}

// TestSettleAfterSeveralChanges: the node changed twice after the release
// (another writer, then the taint back) before the settle window looked at
// it; the watch's store shows only the last version, which is still acted on.
func TestSettleAfterSeveralChanges(t *testing.T) {
	p, client := newPatcher(t, newNode(map[string]string{"pool": "a"}, startup, foreign))
	stop := p.Watch(t.Context())
	defer stop()
	_, err := p.Release(t.Context(), nil)
	require.NoError(t, err)
	n := getNode(t, client)
	n.Labels["pool"], n.ResourceVersion = "b", "100"
	putNode(t, client, n)
	n = n.DeepCopy()
	n.ResourceVersion = "101"
	retaint(t, client, n)
	require.Eventually(t, func() bool {
		obj, ok, _ := p.view.store.GetByKey(nodeName)
		return ok && obj.(*corev1.Node).ResourceVersion == "101"
	}, 5*time.Second, time.Millisecond, "the watch shows the last version")

	again, err := p.Settle(t.Context(), 500*time.Millisecond)
	require.NoError(t, err)
	assert.Equal(t, 1, again)
	n = getNode(t, client)
	assert.True(t, p.Verified(n))
	assert.Equal(t, "b", n.Labels["pool"])
}

// TestReleaseFromAnOldView: a watch that has not shown the newest node yet
// plans from an old one; the lock fails (422) and the retry reads the node,
// so the other writer's taint survives.
func TestReleaseFromAnOldView(t *testing.T) {
	p, client := newPatcher(t, newNode(map[string]string{"pool": "a"}, startup))
	client.PrependWatchReactor("nodes", func(k8stesting.Action) (bool, watch.Interface, error) {
		return true, watch.NewFake(), nil // a watch that shows nothing new
	})
	watching(t, p, client)
	n := getNode(t, client)
	n.Spec.Taints = append(n.Spec.Taints, foreign)
	putNode(t, client, n)

	_, err := p.Release(t.Context(), nil)
	require.NoError(t, err)
	n = getNode(t, client)
	assert.True(t, p.Verified(n))
	assert.Equal(t, []corev1.Taint{foreign}, n.Spec.Taints)
	assert.Equal(t, []string{"patch", "get", "patch"}, verbs(client)[2:])
}

// TestReleaseAfterTheConditionFromAnOldView: the condition is written right before the
// release, and the watch has not shown that write yet. The release plans from the node the
// condition's write returned, not from the watch's older one, so its lock (here the
// resourceVersion's test, the node having no annotations) holds at the first PATCH: no
// 422, no read.
func TestReleaseAfterTheConditionFromAnOldView(t *testing.T) {
	node := newNode(nil, startup)
	node.Annotations = nil
	p, client := newPatcher(t, node)
	client.PrependWatchReactor("nodes", func(k8stesting.Action) (bool, watch.Interface, error) {
		return true, watch.NewFake(), nil // a watch that shows nothing new
	})
	watching(t, p, client)
	before := len(client.Actions())
	_, err := p.SetCondition(t.Context(), wellknown.Condition{Status: corev1.ConditionTrue, Reason: wellknown.Verified, Message: "checks passed"})
	require.NoError(t, err)
	outcome, err := p.Release(t.Context(), map[string]string{"node-ready/verified-at": "now"})
	require.NoError(t, err)
	assert.Equal(t, Patched, outcome)
	assert.Equal(t, []string{"patch", "patch"}, verbs(client)[before:])
	n := getNode(t, client)
	assert.True(t, p.Verified(n))
	assert.Equal(t, "now", n.Annotations["node-ready/verified-at"])
	assert.Equal(t, wellknown.ConditionType, n.Status.Conditions[0].Type)
}

type settleResult struct {
	again int
	err   error
}

// settleInBackground runs a two-second Settle and returns once it watches the node.
func settleInBackground(t *testing.T, p *Patcher, client *fake.Clientset) <-chan settleResult {
	t.Helper()
	done := make(chan settleResult, 1)
	go func() {
		again, err := p.Settle(t.Context(), 2*time.Second)
		done <- settleResult{again, err}
	}()
	require.Eventually(t, func() bool {
		for _, a := range client.Actions() {
			if a.GetVerb() == "watch" {
				return true
			}
		}
		return false
	}, 5*time.Second, time.Millisecond, "settle watches the node")
	return done
}

// TestSeveralStartupTaints: every startup taint is removed in the release's one write, and
// all of them are put back for a re-verification; another taint of the same prefix stays.
func TestSeveralStartupTaints(t *testing.T) {
	readiness := corev1.Taint{Key: "readiness.k8s.io/nodeready", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	otherReadiness := corev1.Taint{Key: "readiness.k8s.io/network-unavailable", Effect: corev1.TaintEffectNoSchedule}
	p, client := newPatcher(t, newNode(nil, startup, otherReadiness, readiness))
	p.spec.Taints = []corev1.Taint{startup, readiness}

	state, err := p.State(t.Context())
	require.NoError(t, err)
	assert.True(t, state.Tainted)
	outcome, err := p.Release(t.Context(), map[string]string{p.spec.Record(): "now"})
	require.NoError(t, err)
	assert.Equal(t, Patched, outcome)
	assert.Equal(t, []corev1.Taint{otherReadiness}, getNode(t, client).Spec.Taints)
	assert.Equal(t, 1, countVerb(client, "patch"), "one write")

	n := getNode(t, client)
	delete(n.Labels, p.spec.LabelKey)
	putNode(t, client, n)
	tainted, err := p.Taint(t.Context())
	require.NoError(t, err)
	assert.True(t, tainted)
	assert.Equal(t, []corev1.Taint{otherReadiness, startup, readiness}, getNode(t, client).Spec.Taints)
}
