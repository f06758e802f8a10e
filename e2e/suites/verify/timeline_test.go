package verify

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/history"
	"github.com/nodeready/nodeready/e2e/framework/karpenter"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// launch is what the timeline saw of one NodeClaim and its Node, each the first time it was
// seen: the order comes from the watches, the times are for the log.
type launch struct {
	claim, node                          string
	claimed, created, registered         time.Time
	verified, initialized, claimReady    time.Time
	owner                                string // the NodeClaim the Node's ownerReference names
	verifiedBeforeRegistered, bothAtOnce bool
	// registeredUntainted: seen registered, before its first release, without the startup
	// taint, which Karpenter should have merged in with the registration.
	registeredUntainted  bool
	createdTainted       bool // the Node carried the startup taint when first seen
	deleted              bool
	initializedCondition string // status of the NodeClaim's Initialized condition, last seen
	conditions           []string
	// initializedTainted: the Node seen labelled karpenter.sh/initialized while it still
	// carried the startup taint. Karpenter labels the Node in the same pass as it sets the
	// NodeClaim's Initialized condition, so this is Initialized before the release.
	initializedTainted bool
}

// timeline watches one NodePool's NodeClaims and Nodes and one workload's pods from a start
// time, and records when each reached each step: pod pending → NodeClaim → Node → registered
// → verified → Initialized → pod running.
type timeline struct {
	start time.Time
	taint corev1.Taint // the startup taint the agents remove
	mu    sync.Mutex
	// launches by NodeClaim name; a kwok Node's hostname label is its NodeClaim's name.
	launches map[string]*launch
	pending  map[string]time.Time // pod → first seen
	running  map[string]time.Time // pod → first seen Running
	podNode  map[string]string
}

// watchTimeline starts the watches; they end with the test.
func watchTimeline(t *testing.T, fw *framework.Framework, dyn dynamic.Interface, pool, app string) *timeline {
	t.Helper()
	return watchTimelineTaint(t, fw, dyn, pool, app, wellknown.StartupTaint())
}

// watchTimelineTaint is watchTimeline for agents that remove another startup taint.
func watchTimelineTaint(t *testing.T, fw *framework.Framework, dyn dynamic.Interface, pool, app string, taint corev1.Taint) *timeline {
	t.Helper()
	tl := &timeline{start: time.Now(), taint: taint, launches: map[string]*launch{}, pending: map[string]time.Time{}, running: map[string]time.Time{}, podNode: map[string]string{}}
	pooled := metav1.ListOptions{LabelSelector: karpenter.NodePoolLabel + "=" + pool}
	claimsSrc := history.From("NodeClaims", dyn.Resource(karpenter.NodeClaims), pooled)
	// Each history keeps the objects themselves; the timeline follows them as they come.
	follow[*unstructured.Unstructured](t, claimsSrc, tl.claim)
	follow[*corev1.Node](t, history.Nodes(fw.Client(), pooled), tl.node)
	follow[*corev1.Pod](t, history.Pods(fw.Client(), metav1.NamespaceDefault, metav1.ListOptions{LabelSelector: "app=" + app}), tl.pod)
	return tl
}

// follow records src until the test ends and calls fn with every version of its objects as
// it comes, and with the last one again, deleted, when an object is deleted.
func follow[T runtime.Object](t *testing.T, src history.Source, fn func(obj any, deleted bool)) {
	t.Helper()
	r, err := history.Record(t.Context(), src, func(o T) any { return o })
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	t.Cleanup(r.Stop)
	r.Follow(func(_ string, e history.Entry[any]) { fn(e.State, e.Deleted) })
}

func (tl *timeline) get(claim string) *launch {
	l := tl.launches[claim]
	if l == nil {
		l = &launch{claim: claim}
		tl.launches[claim] = l
	}
	return l
}

func mark(at *time.Time, now time.Time) {
	if at.IsZero() {
		*at = now
	}
}

func (tl *timeline) claim(obj any, deleted bool) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	now := time.Now()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	l := tl.get(u.GetName())
	mark(&l.claimed, now)
	l.conditions = l.conditions[:0]
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		typ, _ := m["type"].(string)
		status, _ := m["status"].(string)
		l.conditions = append(l.conditions, typ+"="+status)
		if typ == "Initialized" {
			l.initializedCondition = status
			if status == "True" {
				mark(&l.claimReady, now)
			}
		}
	}
	if deleted {
		l.deleted = true
	}
}

func (tl *timeline) node(obj any, deleted bool) {
	n, ok := obj.(*corev1.Node)
	if !ok || deleted {
		return
	}
	now := time.Now()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	l := tl.get(n.Labels[corev1.LabelHostname])
	registered := n.Labels[karpenter.RegisteredLabel] == "true"
	verified := n.Labels[wellknown.VerifiedLabel] == "true"
	if l.created.IsZero() {
		l.createdTainted = tl.tainted(n)
	}
	l.node = n.Name
	mark(&l.created, now)
	if registered && !verified && l.verified.IsZero() && !tl.tainted(n) {
		l.registeredUntainted = true
	}
	if registered {
		mark(&l.registered, now)
	}
	if verified {
		if l.registered.IsZero() {
			l.verifiedBeforeRegistered = true
		}
		mark(&l.verified, now)
	}
	if verified && tl.tainted(n) {
		l.bothAtOnce = true
	}
	if n.Labels[karpenter.InitializedLabel] == "true" {
		mark(&l.initialized, now)
		if tl.tainted(n) {
			l.initializedTainted = true
		}
	}
	for _, ref := range n.OwnerReferences {
		if ref.Kind == "NodeClaim" {
			l.owner = ref.Name
		}
	}
}

// tainted reports whether the node carries the startup taint, by key and effect as the agent
// matches it.
func (tl *timeline) tainted(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&tl.taint) })
}

func (tl *timeline) pod(obj any, deleted bool) {
	p, ok := obj.(*corev1.Pod)
	if !ok || deleted {
		return
	}
	now := time.Now()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if _, seen := tl.pending[p.Name]; !seen {
		tl.pending[p.Name] = now
	}
	if p.Status.Phase == corev1.PodRunning {
		if _, seen := tl.running[p.Name]; !seen {
			tl.running[p.Name] = now
			tl.podNode[p.Name] = p.Spec.NodeName
		}
	}
}

// Launches returns a copy of every launch seen, by NodeClaim name.
func (tl *timeline) Launches() []launch {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var out []launch
	for _, l := range tl.launches {
		c := *l
		c.conditions = slices.Clone(l.conditions)
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].claimed.Before(out[j].claimed) })
	return out
}

// Running returns when each pod was first seen Running.
func (tl *timeline) Running() map[string]time.Time {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return maps.Clone(tl.running)
}

// Claims returns the names of the NodeClaims seen.
func (tl *timeline) Claims() []string {
	var names []string
	for _, l := range tl.Launches() {
		if !l.claimed.IsZero() {
			names = append(names, l.claim)
		}
	}
	return names
}

// Log writes one line per launch with the time of each step since the watch began, and one
// per pod: for people, never asserted.
func (tl *timeline) Log(t *testing.T) {
	t.Helper()
	since := func(at time.Time) string {
		if at.IsZero() {
			return "-"
		}
		return fmt.Sprintf("+%.2fs", at.Sub(tl.start).Seconds())
	}
	var b strings.Builder
	tl.mu.Lock()
	for pod, at := range tl.pending {
		fmt.Fprintf(&b, "pod %s: pending %s, running %s on %s\n", pod, since(at), since(tl.running[pod]), tl.podNode[pod])
	}
	tl.mu.Unlock()
	for _, l := range tl.Launches() {
		fmt.Fprintf(&b, "NodeClaim %s %s, Node %s %s (startup taint at creation: %v), registered %s, verified %s, initialized %s (NodeClaim Initialized %s); conditions %v\n",
			l.claim, since(l.claimed), l.node, since(l.created), l.createdTainted, since(l.registered), since(l.verified), since(l.initialized), since(l.claimReady), l.conditions)
	}
	t.Logf("timeline (from the workload's creation):\n%s", b.String())
}
