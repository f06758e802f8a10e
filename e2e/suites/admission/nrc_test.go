package admission

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// ruleTaint is the taint of the NodeReadinessRule in the README ("Works with"), which the
// rule removes once nodeready's condition is True.
var ruleTaint = corev1.Taint{Key: "readiness.k8s.io/nodeready-verified", Value: "pending", Effect: corev1.TaintEffectNoSchedule}

// TestTaintOwnerExternal: with TAINT_OWNER=external, nodeready leaves its node's taint to a
// NodeReadinessRule (here a stand-in shaped like one, see ruleStandIn) that removes it when
// node-ready/Verified turns True. A node whose checks pass is released by the rule and its
// agent ends through the label; a node whose checks fail keeps the rule's taint with
// ChecksFailed and no label, and is released once repaired. In no version of either node
// is the label there before the condition is True (the label ends the agent: a node
// labelled without the condition would be held with nobody to say why), and the rule is
// the only one that removes its taint.
func TestTaintOwnerExternal(t *testing.T) {
	fw := framework.New(t, framework.Options{})
	admin := fw.Client()
	f := fw.NewFleet("nrc")
	rule := startRuleStandIn(t, admin, labels.SelectorFromSet(labels.Set{framework.FleetLabel: f.Name()}), ruleTaint)
	// The rule's taint is the node's startup taint here (TAINT_KEY): the DaemonSet tolerates
	// it, as the chart's config.taintKey makes it.
	fw.TolerateKey(ruleTaint.Key)

	env := map[string]string{"TAINT_OWNER": "external", "TAINT_KEY": ruleTaint.Key, "TAINT_VALUE": ruleTaint.Value,
		"MAX_RETRIES": "2", "RETRY_BACKOFF_BASE": "200ms", "RETRY_BACKOFF_MAX": "1s"}
	const passes, fails = "nrc-passes", "nrc-fails"
	versions := map[string]func() []*corev1.Node{passes: recordNodes(t, admin, passes), fails: recordNodes(t, admin, fails)}
	held := framework.NodeOptions{Untainted: true, Taints: []corev1.Taint{ruleTaint}, Env: env}
	require.NoError(t, f.AddNode(t.Context(), passes, held))
	held.BrokenDNS = true
	require.NoError(t, f.AddNode(t.Context(), fails, held))

	waitRuleReleased(t, admin, passes)
	require.NoError(t, f.WaitAgentsGone(t.Context(), passes), "the agent ends through the label")

	cond, err := fw.Cluster().WaitAgentCondition(t.Context(), fails, string(wellknown.ChecksFailed))
	require.NoError(t, err)
	assert.Equal(t, corev1.ConditionFalse, cond.Status)
	n := framework.GetNode(t, admin, fails)
	assert.True(t, hasTaint(n.Spec.Taints, ruleTaint), "the rule's taint is gone from a node whose checks fail")
	assert.NotContains(t, n.Labels, wellknown.VerifiedLabel)

	f.DNS(fails).SetBroken(false)
	waitRuleReleased(t, admin, fails)
	require.NoError(t, f.WaitAgentsGone(t.Context(), fails))

	assert.ElementsMatch(t, []string{passes, fails}, rule.removals(), "the rule removes each node's taint once")
	for name, seen := range versions {
		for _, v := range seen() {
			cond := framework.AgentCondition(v)
			verified := cond != nil && cond.Status == corev1.ConditionTrue
			_, labelled := v.Labels[wellknown.VerifiedLabel]
			assert.False(t, labelled && !verified, "node %s labelled before its condition is True (resourceVersion %s)", name, v.ResourceVersion)
			assert.False(t, !hasTaint(v.Spec.Taints, ruleTaint) && !verified, "node %s lost the rule's taint before its condition is True (resourceVersion %s)", name, v.ResourceVersion)
			assert.Subset(t, v.Spec.Taints, framework.ForeignTaints, "node %s lost another owner's taint (resourceVersion %s)", name, v.ResourceVersion)
		}
		t.Logf("node %s: %d versions seen", name, len(seen()))
	}
}

// waitRuleReleased waits until the node carries the verified label and the True
// condition, and the rule has removed its taint.
func waitRuleReleased(t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	var last *corev1.Node
	err := wait.PollUntilContextTimeout(t.Context(), framework.PollInterval, framework.WaitTimeout, true, func(ctx context.Context) (bool, error) {
		n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = n
		cond := framework.AgentCondition(n)
		return n.Labels[wellknown.VerifiedLabel] == "true" && cond != nil && cond.Status == corev1.ConditionTrue &&
			!hasTaint(n.Spec.Taints, ruleTaint), nil
	})
	require.NoError(t, err, "node %s not released by the rule; last seen %v %v %+v", name, last.GetLabels(), taintsOf(last), framework.AgentCondition(last))
}

func taintsOf(n *corev1.Node) []corev1.Taint {
	if n == nil {
		return nil
	}
	return n.Spec.Taints
}

// ruleStandIn stands for node-readiness-controller applying a NodeReadinessRule with
// enforcementMode bootstrap-only, as NRC's API types and documentation (v0.5.0) describe it;
// NRC itself cannot be built from the Go module proxy here. On each node its selector
// matches, once node-ready/Verified is True it removes its taint (a JSON Patch that tests
// the taint list it read), and then never looks at that node again.
type ruleStandIn struct {
	mu      sync.Mutex
	done    map[string]bool
	removed []string
}

func startRuleStandIn(t *testing.T, c kubernetes.Interface, selector labels.Selector, taint corev1.Taint) *ruleStandIn {
	t.Helper()
	r := &ruleStandIn{done: map[string]bool{}}
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan struct{})
	t.Cleanup(func() { cancel(); <-stopped })
	go func() {
		defer close(stopped)
		_ = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			list, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
			if err != nil {
				return false, nil
			}
			for i := range list.Items {
				r.reconcile(ctx, c, &list.Items[i], taint)
			}
			return false, nil
		})
	}()
	return r
}

func (r *ruleStandIn) reconcile(ctx context.Context, c kubernetes.Interface, n *corev1.Node, taint corev1.Taint) {
	r.mu.Lock()
	done := r.done[n.Name]
	r.mu.Unlock()
	cond := framework.AgentCondition(n)
	if done || cond == nil || cond.Status != corev1.ConditionTrue {
		return
	}
	kept := slices.DeleteFunc(slices.Clone(n.Spec.Taints), func(t corev1.Taint) bool { return taint.MatchTaint(&t) })
	if len(kept) < len(n.Spec.Taints) {
		patch, err := json.Marshal([]map[string]any{
			{"op": "test", "path": "/spec/taints", "value": n.Spec.Taints},
			{"op": "replace", "path": "/spec/taints", "value": kept},
		})
		if err != nil {
			return
		}
		if _, err := c.CoreV1().Nodes().Patch(ctx, n.Name, types.JSONPatchType, patch,
			metav1.PatchOptions{FieldManager: "node-readiness-controller"}); err != nil {
			return // a lost lock or a busy server: the next pass tries again
		}
		r.mu.Lock()
		r.removed = append(r.removed, n.Name)
		r.mu.Unlock()
	}
	r.mu.Lock()
	r.done[n.Name] = true
	r.mu.Unlock()
}

func (r *ruleStandIn) removals() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.removed)
}

// recordNodes watches the node named name from before its creation and returns a function
// that gives every version of it seen so far.
func recordNodes(t *testing.T, c kubernetes.Interface, name string) func() []*corev1.Node {
	t.Helper()
	w, err := c.CoreV1().Nodes().Watch(t.Context(), metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	require.NoError(t, err)
	t.Cleanup(w.Stop)
	var mu sync.Mutex
	var seen []*corev1.Node
	go func() {
		for ev := range w.ResultChan() {
			if n, ok := ev.Object.(*corev1.Node); ok && ev.Type != watch.Deleted {
				mu.Lock()
				seen = append(seen, n)
				mu.Unlock()
			}
		}
	}()
	return func() []*corev1.Node {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}
