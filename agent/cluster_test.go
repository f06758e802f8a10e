package agent

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodeready/nodeready/internal/kube"
	"github.com/nodeready/nodeready/internal/kube/adapt"
	"github.com/nodeready/nodeready/internal/wellknown"
)

const nodeName = "node-a"

var (
	startupTaint = corev1.Taint{Key: "node-ready/unverified", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	// otherTaint is another controller's: every release must leave it.
	otherTaint = corev1.Taint{Key: "example.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}

	nodesGVR  = corev1.SchemeGroupVersion.WithResource("nodes")
	eventsGVR = eventsv1.SchemeGroupVersion.WithResource("events")
)

// heldNode is node-a as it registers: held by the startup taint, with a label, an
// annotation and a taint of others.
func heldNode() *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName, ResourceVersion: "1", Labels: map[string]string{"kubernetes.io/hostname": nodeName},
			Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{startupTaint, otherTaint}},
	}
}

// cluster is the fake API server of one test.
type cluster struct {
	*fake.Clientset
	rv atomic.Int64
	// writing makes a write and its new resourceVersion one step, as the API server's.
	writing    sync.Mutex
	mu         sync.Mutex
	conditions []corev1.NodeCondition // node-ready/Verified as each write left it
	// disagreed are the versions of the node a write left with the verified label and a
	// condition that says otherwise.
	disagreed []string
}

// newCluster serves objects. Its node writes behave as the API server's: a failed JSON
// Patch test is 422 Invalid (the tracker's is a plain error, which nodepatch would take for
// a write that got no answer), and every write gives the node a new resourceVersion (the
// tracker keeps it, and the settle window needs it).
func newCluster(objects ...runtime.Object) *cluster {
	c := &cluster{Clientset: fake.NewClientset(objects...)}
	c.rv.Store(1)
	c.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj, err := c.apply(a)
		return true, obj, err
	})
	return c
}

// kube is the cluster as the agent's API client.
func (c *cluster) kube() kube.Interface { return adapt.Clientset(c) }

// apply stores a node patch as the API server would; a fault that lets a write land calls it.
func (c *cluster) apply(a k8stesting.Action) (runtime.Object, error) {
	c.writing.Lock()
	defer c.writing.Unlock()
	before, _ := c.Tracker().Get(nodesGVR, "", nodeName)
	_, obj, err := k8stesting.ObjectReaction(c.Tracker())(a)
	if err != nil && failedTest(err) {
		return nil, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Node").GroupKind(), nodeName, nil)
	}
	if err != nil {
		return nil, err
	}
	n := obj.(*corev1.Node).DeepCopy()
	n.ResourceVersion = strconv.FormatInt(c.rv.Add(1), 10)
	if err := c.Tracker().Update(nodesGVR, n, ""); err != nil {
		return nil, err
	}
	if old, ok := before.(*corev1.Node); ok && disagrees(n) && !disagrees(old) {
		c.mu.Lock()
		c.disagreed = append(c.disagreed, fmt.Sprintf("rv %s: label %q, condition %+v", n.ResourceVersion, n.Labels[wellknown.VerifiedLabel], verifiedCondition(n)))
		c.mu.Unlock()
	}
	if a.GetSubresource() == "status" {
		if cond := verifiedCondition(n); cond != nil {
			c.mu.Lock()
			c.conditions = append(c.conditions, *cond)
			c.mu.Unlock()
		}
	}
	return n, nil
}

// disagrees reports whether n carries the verified label with a condition that does not say
// so: True and Verified for the label's value true, FailedOpen for failed-open.
func disagrees(n *corev1.Node) bool {
	value, ok := n.Labels[wellknown.VerifiedLabel]
	if !ok {
		return false
	}
	cond := verifiedCondition(n)
	if value == wellknown.FailedOpenValue {
		return cond == nil || cond.Reason != string(wellknown.FailedOpen)
	}
	return cond == nil || cond.Status != corev1.ConditionTrue || cond.Reason != string(wellknown.Verified)
}

// failedTest reports whether err is the tracker's failed JSON Patch test: of a value, or of
// a path the node does not have (a condition not written yet). The API server answers both 422.
func failedTest(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "test failed") || strings.Contains(msg, "test operation") || strings.Contains(msg, "error in test")
}

// node returns node-a as stored, without a request the agent's could be mistaken for.
func (c *cluster) node(t *testing.T) *corev1.Node {
	t.Helper()
	obj, err := c.Tracker().Get(nodesGVR, "", nodeName)
	require.NoError(t, err)
	return obj.(*corev1.Node)
}

// editNode changes node-a as another writer (a person, Karpenter) would.
func (c *cluster) editNode(t *testing.T, edit func(*corev1.Node)) {
	t.Helper()
	c.writing.Lock()
	defer c.writing.Unlock()
	n := c.node(t).DeepCopy()
	edit(n)
	n.ResourceVersion = strconv.FormatInt(c.rv.Add(1), 10)
	require.NoError(t, c.Tracker().Update(nodesGVR, n, ""))
}

// deleteNode deletes node-a as another writer would.
func (c *cluster) deleteNode(t *testing.T) {
	t.Helper()
	c.writing.Lock()
	defer c.writing.Unlock()
	require.NoError(t, c.Tracker().Delete(nodesGVR, "", nodeName))
}

// condition returns the node's node-ready/Verified condition, or a zero one.
func (c *cluster) condition(t *testing.T) corev1.NodeCondition {
	t.Helper()
	if cond := verifiedCondition(c.node(t)); cond != nil {
		return *cond
	}
	return corev1.NodeCondition{}
}

func verifiedCondition(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == wellknown.ConditionType {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// reasons lists the reasons of the condition as each write that landed left it.
func (c *cluster) reasons() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := []string{}
	for _, cond := range c.conditions {
		out = append(out, cond.Reason)
	}
	return out
}

// requests counts the agent's requests of verb to nodes (subresource "" is the node itself).
func (c *cluster) requests(verb, subresource string) int {
	n := 0
	for _, a := range c.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == "nodes" && a.GetSubresource() == subresource {
			n++
		}
	}
	return n
}

// writes counts the agent's writes to nodes, of any verb and subresource.
func (c *cluster) writes() int {
	n := 0
	for _, a := range c.Actions() {
		switch a.GetVerb() {
		case "get", "list", "watch":
		default:
			if a.GetResource().Resource == "nodes" {
				n++
			}
		}
	}
	return n
}

// events returns the Events stored, each once however often it was emitted (its series).
func (c *cluster) events(t *testing.T) []eventsv1.Event {
	t.Helper()
	obj, err := c.Tracker().List(eventsGVR, eventsv1.SchemeGroupVersion.WithKind("Event"), "")
	require.NoError(t, err)
	return obj.(*eventsv1.EventList).Items
}

// eventsOf returns the stored Events of reason.
func (c *cluster) eventsOf(t *testing.T, reason wellknown.Reason) []eventsv1.Event {
	t.Helper()
	var out []eventsv1.Event
	for _, e := range c.events(t) {
		if e.Reason == string(reason) {
			out = append(out, e)
		}
	}
	return out
}

// eventReasons lists the reasons of the stored Events, one for each Event.
func (c *cluster) eventReasons(t *testing.T) []string {
	t.Helper()
	out := []string{}
	for _, e := range c.events(t) {
		out = append(out, e.Reason)
	}
	return out
}

// emittedOnce asserts that one Event of reason was emitted, once: one is stored, with no
// series (the same note emitted again makes one).
func (c *cluster) emittedOnce(t *testing.T, reason wellknown.Reason) {
	t.Helper()
	got := c.eventsOf(t, reason)
	if assert.Len(t, got, 1, "%s Events", reason) && got[0].Series != nil {
		assert.Failf(t, "emitted more than once", "%s emitted %d times", reason, got[0].Series.Count)
	}
}

// waitEvent waits until an Event of reason is stored and returns it.
func (c *cluster) waitEvent(t *testing.T, reason wellknown.Reason) eventsv1.Event {
	t.Helper()
	var got []eventsv1.Event
	waitFor(t, "a "+string(reason)+" Event", func() bool {
		got = c.eventsOf(t, reason)
		return len(got) > 0
	})
	return got[0]
}

// fault makes the API server answer the agent's requests of verb ("*" for any) to nodes
// and subresource ("*" for any) with err while the returned switch is on, as it is at
// first. Like every reactor, it must be added before the agent runs: the fake's chain
// of reactors has no lock.
func (c *cluster) fault(verb, subresource string, err error) *atomic.Bool {
	on := &atomic.Bool{}
	on.Store(true)
	c.PrependReactor(verb, "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if !on.Load() || (subresource != "*" && a.GetSubresource() != subresource) {
			return false, nil, nil
		}
		return true, nil, err
	})
	return on
}

// unreachable makes every request about nodes, the watch too, fail with err until the
// returned switch is turned off: the API server is away, or refuses them all.
func (c *cluster) unreachable(err error) *atomic.Bool {
	on := c.fault("*", "*", err)
	c.PrependWatchReactor("nodes", func(k8stesting.Action) (bool, watch.Interface, error) {
		if !on.Load() {
			return false, nil, nil
		}
		return true, nil, err
	})
	return on
}

// onRelease runs do as the agent's release (a write of the node itself) reaches the API
// server, before it is stored.
func (c *cluster) onRelease(do func()) {
	c.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "" {
			do()
		}
		return false, nil, nil
	})
}
