package reliability

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodeready/nodeready/e2e/framework"
)

// writerUser is who the foreign writers are: a ServiceAccount in kube-system, like a CNI or
// CSI node agent. The API server's priority and fairness then treat them as it treats such
// agents, and the nodeready agents, instead of as the exempt cluster admin: they cannot
// starve everyone else, however fast they write.
const (
	writerSA   = "e2e-node-writer"
	writerUser = "system:serviceaccount:" + framework.Namespace + ":" + writerSA
)

// writerClient returns a client that acts as writerUser (the admin impersonates it), with no
// client-side rate limit, after granting it get, update and patch on nodes. The grant is
// removed when the test ends.
func writerClient(t *testing.T, fw *framework.Framework) kubernetes.Interface {
	t.Helper()
	ctx := t.Context()
	admin := fw.Client()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: writerSA},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "update", "patch"}}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: writerSA},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: writerSA},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: writerSA, Namespace: framework.Namespace}},
	}
	_, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = admin.RbacV1().ClusterRoleBindings().Delete(ctx, writerSA, metav1.DeleteOptions{})
		_ = admin.RbacV1().ClusterRoles().Delete(ctx, writerSA, metav1.DeleteOptions{})
	})

	cfg := fw.ControlPlane().RESTConfig()
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: writerUser,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + framework.Namespace, "system:authenticated"},
	}
	cfg.QPS = -1 // no client-side limit: as fast as the API server lets them
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	// RBAC takes effect once the API server's informers have the binding.
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Nodes().Get(ctx, "no-such-node", metav1.GetOptions{})
		return !apierrors.IsForbidden(err), nil
	})
	require.NoError(t, err, "the writers' permissions did not come into force")
	return client
}

// writeMode is how a foreign writer changes a node. Each is a proper write: it cannot undo a
// concurrent change of another writer.
type writeMode int

const (
	// patchTaint toggles a taint with a JSON Patch guarded by a test of the whole taint list,
	// as nodepatch and the aws-ebs-csi-driver do; a failed test (422) means read again.
	patchTaint writeMode = iota
	// updateTaintAndLabel toggles a taint and a label, in turns, with an Update carrying the
	// resourceVersion it read, as controllers built on informers do; 409 means read again.
	updateTaintAndLabel
	// patchLabel toggles a label with a JSON Patch: add, or test the value and remove. A
	// label is one key of a map, so adding needs no lock.
	patchLabel
)

// item is one taint (key and effect) or label a writer owns.
type item struct {
	taint *corev1.Taint
	label string
}

func (it item) String() string {
	if it.taint != nil {
		return "taint " + it.taint.Key + ":" + string(it.taint.Effect)
	}
	return "label " + it.label
}

func (it item) in(taints []corev1.Taint, labels map[string]string) bool {
	if it.taint != nil {
		return slices.ContainsFunc(taints, func(t corev1.Taint) bool { return t.Key == it.taint.Key && t.Effect == it.taint.Effect })
	}
	_, ok := labels[it.label]
	return ok
}

// change is one successful write of a writer: after it, at resourceVersion RV, the item was
// present or not.
type change struct {
	RV      int64
	Item    item
	Present bool
}

// writer plays another controller of the node (a CNI, a CSI node agent, the node lifecycle
// controller): it adds and removes its own taints and labels as fast as it can and keeps
// track of what it believes the node holds.
type writer struct {
	name   string
	node   string
	mode   writeMode
	client kubernetes.Interface
	items  []item

	mu        sync.Mutex
	belief    map[string]bool // item -> present, after the writer's last write
	changes   []change
	writes    int
	conflicts int
	// surprises are reads that contradict the belief: an item of this writer lost or
	// brought back by someone else.
	surprises []string
	errors    []string
	turn      int
}

func newWriter(client kubernetes.Interface, node, name string, mode writeMode) *writer {
	w := &writer{name: name, node: node, mode: mode, client: client, belief: map[string]bool{}}
	switch mode {
	case patchTaint:
		w.items = []item{{taint: &corev1.Taint{Key: "example.com/" + name + "-not-ready", Value: "true", Effect: corev1.TaintEffectNoSchedule}}}
	case updateTaintAndLabel:
		w.items = []item{
			{taint: &corev1.Taint{Key: "example.com/" + name + "-pressure", Value: "true", Effect: corev1.TaintEffectPreferNoSchedule}},
			{label: "example.com/" + name + "-ready"},
		}
	case patchLabel:
		w.items = []item{{label: "example.com/" + name + "-feature"}}
	}
	return w
}

// run writes until stop is closed. A write under way when stop closes is finished, so what
// the writer believes is what it did.
func (w *writer) run(stop <-chan struct{}) {
	ctx := context.Background()
	for {
		select {
		case <-stop:
			return
		default:
		}
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		err := w.step(rctx)
		cancel()
		w.mu.Lock()
		switch {
		case err == nil:
		case apierrors.IsConflict(err) || apierrors.IsInvalid(err):
			w.conflicts++
		default:
			w.errors = append(w.errors, err.Error())
			if len(w.errors) > 100 {
				w.mu.Unlock()
				return
			}
		}
		w.mu.Unlock()
	}
}

func (w *writer) step(ctx context.Context) error {
	nodes := w.client.CoreV1().Nodes()
	w.mu.Lock()
	it := w.items[w.turn%len(w.items)]
	w.mu.Unlock()

	if w.mode == patchLabel {
		// No read: the label map is only this key's business.
		present := w.believes(it)
		var patch jsonPatch
		if present {
			patch = jsonPatch{
				{"op": "test", "path": "/metadata/labels/" + escape(it.label), "value": "on"},
				{"op": "remove", "path": "/metadata/labels/" + escape(it.label)},
			}
		} else {
			patch = jsonPatch{{"op": "add", "path": "/metadata/labels/" + escape(it.label), "value": "on"}}
		}
		n, err := nodes.Patch(ctx, w.node, types.JSONPatchType, patch.bytes(), metav1.PatchOptions{FieldManager: w.name})
		if apierrors.IsInvalid(err) && present {
			// Only this writer removes the label: a failed test means it was lost.
			w.surprise(fmt.Sprintf("%s: lost before its removal (%v)", it, err))
		}
		if err != nil {
			return err
		}
		w.did(n, it, !present)
		return nil
	}

	n, err := nodes.Get(ctx, w.node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	have := it.in(n.Spec.Taints, n.Labels)
	if have != w.believes(it) {
		w.surprise(fmt.Sprintf("%s: read present=%v at rv %s, after writing present=%v", it, have, n.ResourceVersion, !have))
	}
	taints := slices.Clone(n.Spec.Taints)
	labels := n.Labels
	switch {
	case it.taint != nil && have:
		taints = slices.DeleteFunc(taints, func(t corev1.Taint) bool { return t.Key == it.taint.Key && t.Effect == it.taint.Effect })
	case it.taint != nil:
		taints = append(taints, *it.taint)
	case have:
		delete(labels, it.label)
	default:
		labels[it.label] = "on"
	}

	var out *corev1.Node
	switch w.mode {
	case patchTaint:
		patch := jsonPatch{
			{"op": "test", "path": "/spec/taints", "value": n.Spec.Taints},
			{"op": "replace", "path": "/spec/taints", "value": taints},
		}
		out, err = nodes.Patch(ctx, w.node, types.JSONPatchType, patch.bytes(), metav1.PatchOptions{FieldManager: w.name})
	case updateTaintAndLabel:
		n.Spec.Taints, n.Labels = taints, labels
		out, err = nodes.Update(ctx, n, metav1.UpdateOptions{FieldManager: w.name}) // n carries its resourceVersion
	}
	if err != nil {
		return err
	}
	w.did(out, it, !have)
	return nil
}

func (w *writer) believes(it item) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.belief[it.String()]
}

func (w *writer) did(n *corev1.Node, it item, present bool) {
	rv, _ := strconv.ParseInt(n.ResourceVersion, 10, 64)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.belief[it.String()] = present
	w.changes = append(w.changes, change{RV: rv, Item: it, Present: present})
	w.writes++
	w.turn++
	if got := it.in(n.Spec.Taints, n.Labels); got != present {
		w.surprises = append(w.surprises, fmt.Sprintf("%s: the answer to the write shows present=%v, want %v", it, got, present))
	}
}

func (w *writer) surprise(s string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.surprises = append(w.surprises, s)
}

// replay is what the writers of one node did, ordered by resourceVersion.
type replay struct {
	items   []item
	changes map[string][]change // item -> its changes, by RV
}

func newReplay(writers []*writer) replay {
	r := replay{changes: map[string][]change{}}
	for _, w := range writers {
		w.mu.Lock()
		r.items = append(r.items, w.items...)
		for _, c := range w.changes {
			r.changes[c.Item.String()] = append(r.changes[c.Item.String()], c)
		}
		w.mu.Unlock()
	}
	for _, cs := range r.changes {
		sort.Slice(cs, func(i, j int) bool { return cs[i].RV < cs[j].RV })
	}
	return r
}

// want returns whether the item must be on the node at resourceVersion rv: as its owner's
// last write at or before rv left it, absent before the first.
func (r replay) want(it item, rv int64) bool {
	cs := r.changes[it.String()]
	i := sort.Search(len(cs), func(i int) bool { return cs[i].RV > rv })
	return i > 0 && cs[i-1].Present
}

// check compares every recorded version of the node with what its writers' own writes
// imply, and returns the versions that lost or brought back an item.
func (r replay) check(vs []nodeVersion) (lost, resurrected []string) {
	for _, v := range vs {
		if v.Deleted {
			continue
		}
		for _, it := range r.items {
			want, got := r.want(it, v.RV), it.in(v.Taints, v.Labels)
			switch {
			case want && !got:
				lost = append(lost, fmt.Sprintf("%s missing at rv %d", it, v.RV))
			case !want && got:
				resurrected = append(resurrected, fmt.Sprintf("%s present at rv %d", it, v.RV))
			}
		}
	}
	return lost, resurrected
}
