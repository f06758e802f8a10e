package verify

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/karpenter"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// TestKarpenter runs the real Karpenter (kwok provider) on one control plane with nodeready
// installed, and a NodePool per scenario whose startupTaints hold nodeready's taint, or, in
// the last scenarios, none: the creation-time admission policy puts the taint on.
func TestKarpenter(t *testing.T) {
	fw := framework.New(t, framework.Options{Karpenter: true})
	k, dyn := fw.Karpenter(), fw.Dynamic()
	// replace-node needs its RBAC and policy, and they name Karpenter's NodeClaims.
	out, err := fw.Kubectl("apply", "-f", filepath.Join(fw.RepoRoot(), "manifests", "replace-node"))
	require.NoError(t, err)
	t.Logf("kubectl apply -f manifests/replace-node/:\n%s", out)

	t.Run("pending pods launch nodes that are verified, then Initialized, then run the pods", func(t *testing.T) {
		testLaunch(t, fw, dyn)
	})
	t.Run("held nodes: no extra NodeClaim, not Initialized, until their checks pass", func(t *testing.T) {
		testHeld(t, fw, dyn)
	})
	t.Run("an agent that starts before registration waits for it", func(t *testing.T) {
		testBeforeRegistration(t, fw, dyn, k)
	})
	t.Run("replace-node deletes the NodeClaim and Karpenter replaces the node", func(t *testing.T) {
		testReplace(t, fw, dyn, wellknown.StartupTaint().Key)
	})
	// Karpenter told nothing: the taint put on by the creation-time policy, no startupTaints.
	var runs []heldRun
	t.Run("zero change: a readiness.k8s.io/ taint holds nodes Karpenter counts as launching", func(t *testing.T) {
		runs = append(runs, testZeroChange(t, fw, dyn))
	})
	t.Run("comparison: nodeready's own taint without startupTaints", func(t *testing.T) {
		runs = append(runs, testComparison(t, fw, dyn))
	})
	logComparison(t, runs...)
	t.Run("replace-node with a readiness.k8s.io/ taint", func(t *testing.T) {
		testReplace(t, fw, dyn, karpenter.ReadinessTaintKey)
	})
}

// testLaunch: three pending pods, one per node, make Karpenter launch three nodes; each agent
// verifies its node after Karpenter registered it, Karpenter then counts the NodeClaim
// Initialized, and the pods run. Then one node is verified again, with the taint put back.
func testLaunch(t *testing.T, fw *framework.Framework, dyn dynamic.Interface) {
	ctx := t.Context()
	const pool, app, replicas = "launch", "launch", 3
	f := fw.NewFleet(pool)
	require.NoError(t, f.Adopt(ctx, karpenter.NodePoolLabel, func(*corev1.Node) framework.NodeOptions {
		return framework.NodeOptions{Env: map[string]string{"REVERIFY_TAINT": "true"}}
	}))
	createNodePool(t, dyn, karpenter.NodePool(pool, f.Name()))
	tl := watchTimeline(t, fw, dyn, pool, app)
	deploy(t, fw, app, pool, replicas)

	nodes := waitNodes(t, tl, replicas)
	require.NoError(t, f.WaitReleased(ctx, nodes...))
	on := waitRunning(t, fw, app, replicas)
	for _, node := range nodes {
		l := claimOf(tl, node)
		waitInitialized(t, dyn, l.claim)
		requireNeverHalfReleased(t, f, tl, node)
		n := fw.Node(node)
		assert.Equal(t, "true", n.Labels[karpenter.RegisteredLabel], "node %s", node)
		assert.Equal(t, l.claim, l.owner, "node %s: the ownerReference names its NodeClaim", node)
		assert.Equal(t, string(wellknown.Verified), fw.WaitCondition(node, string(wellknown.Verified)).Reason)
	}
	assert.ElementsMatch(t, nodes, uniqueValues(on), "one pod on each launched node")
	tl.Log(t)
	assert.Len(t, tl.Claims(), replicas, "NodeClaims: %v", tl.Claims())

	// Re-verification: the label removed, the agent comes back, puts the taint back
	// (REVERIFY_TAINT) and releases the node again. Karpenter leaves the node alone: the
	// NodeClaim stays Initialized and no NodeClaim is added.
	// Once its first agent is gone: until then, that agent's settle window would put a
	// removed label straight back.
	node := nodes[0]
	require.NoError(t, f.WaitAgentsGone(ctx, node))
	_, err := fw.KubectlContext(ctx, "label", "node", node, wellknown.VerifiedLabel+"-")
	require.NoError(t, err)
	require.NoError(t, f.WaitReleased(ctx, node))
	requireNeverHalfReleased(t, f, tl, node)
	assert.True(t, retaintedAfterRelease(f.History().States(node)), "node %s was not tainted again while verified again: %v", node, f.History().States(node))
	assert.Equal(t, "True", initialized(t, dyn, claimOf(tl, node).claim))
	assert.Len(t, tl.Claims(), replicas, "NodeClaims after the re-verification: %v", tl.Claims())
	t.Logf("history of %s: %v", node, f.History().States(node))
}

// testHeld: nodes whose checks fail stay held; Karpenter counts them as launching for the
// pending pods (no extra NodeClaim) and does not count them Initialized, which their
// NodeClaims show. Healed, they are verified and Initialized, and the pods run.
func testHeld(t *testing.T, fw *framework.Framework, dyn dynamic.Interface) {
	ctx := t.Context()
	const pool, app, replicas = "held", "held", 2
	f := fw.NewFleet(pool)
	require.NoError(t, f.Adopt(ctx, karpenter.NodePoolLabel, func(*corev1.Node) framework.NodeOptions {
		return framework.NodeOptions{BrokenDNS: true, Env: map[string]string{"MAX_RETRIES": "2"}}
	}))
	createNodePool(t, dyn, karpenter.NodePool(pool, f.Name()))
	tl := watchTimeline(t, fw, dyn, pool, app)
	deploy(t, fw, app, pool, replicas)

	nodes := waitNodes(t, tl, replicas)
	for _, node := range nodes {
		cond := fw.WaitCondition(node, string(wellknown.ChecksFailed))
		assert.Equal(t, corev1.ConditionFalse, cond.Status)
		// Rounds go on every RETRY_BACKOFF_MAX (1s): after these, Karpenter has had the
		// pending pods and the held nodes before it through several batch windows.
		agent, err := f.WaitAgentRunning(ctx, node)
		require.NoError(t, err)
		require.NoError(t, f.WaitMetric(ctx, agent, "nodeready_rounds_total", 8))
	}
	for _, node := range nodes {
		n := fw.Node(node)
		assert.True(t, framework.IsTainted(n), "node %s lost its startup taint", node)
		assert.Empty(t, n.Labels[wellknown.VerifiedLabel], "node %s", node)
		assert.Equal(t, "true", n.Labels[karpenter.RegisteredLabel], "node %s", node)
		assert.Empty(t, n.Labels[karpenter.InitializedLabel], "node %s", node)
		l := claimOf(tl, node)
		assert.NotEqual(t, "True", initialized(t, dyn, l.claim), "NodeClaim %s of held node %s is Initialized", l.claim, node)
		t.Logf("NodeClaim %s of held node %s: conditions %v", l.claim, node, l.conditions)
	}
	assert.Len(t, tl.Claims(), replicas, "NodeClaims while the nodes are held: %v", tl.Claims())
	pods, err := fw.Client().CoreV1().Pods(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	require.NoError(t, err)
	for _, p := range pods.Items {
		assert.Empty(t, p.Spec.NodeName, "pod %s bound to a held node", p.Name)
	}

	for _, node := range nodes {
		f.DNS(node).SetBroken(false)
	}
	require.NoError(t, f.WaitReleased(ctx, nodes...))
	waitRunning(t, fw, app, replicas)
	for _, node := range nodes {
		waitInitialized(t, dyn, claimOf(tl, node).claim)
		requireNeverHalfReleased(t, f, tl, node)
	}
	tl.Log(t)
	assert.Len(t, tl.Claims(), replicas, "NodeClaims: %v", tl.Claims())
}

// testBeforeRegistration: Karpenter is paused the moment its Node appears, before it
// registers it, so the agent starts on a node without the startup taint and without
// karpenter.sh/registered. The agent must neither label it (Karpenter would then merge the
// taint into a labelled node, which no agent would ever release) nor count it as not held.
func testBeforeRegistration(t *testing.T, fw *framework.Framework, dyn dynamic.Interface, k *karpenter.Karpenter) {
	ctx := t.Context()
	const pool, app = "early", "early"
	f := fw.NewFleet(pool)
	var mu sync.Mutex
	var paused []string
	require.NoError(t, f.Adopt(ctx, karpenter.NodePoolLabel, func(n *corev1.Node) framework.NodeOptions {
		if n.Labels[karpenter.RegisteredLabel] != "true" {
			if err := k.Pause(); err == nil {
				mu.Lock()
				paused = append(paused, n.Name)
				mu.Unlock()
			}
		}
		return framework.NodeOptions{}
	}))
	t.Cleanup(func() { _ = k.Resume() })
	createNodePool(t, dyn, karpenter.NodePool(pool, f.Name()))
	tl := watchTimeline(t, fw, dyn, pool, app)
	deploy(t, fw, app, pool, 1)

	node := waitNodes(t, tl, 1)[0]
	mu.Lock()
	require.Equal(t, []string{node}, paused, "Karpenter registered the node before it could be paused")
	mu.Unlock()
	agent, err := f.WaitAgentRunning(ctx, node)
	require.NoError(t, err)
	// Rounds pass while Karpenter is paused: the agent's checks pass, and it waits.
	require.NoError(t, f.WaitMetric(ctx, agent, "nodeready_rounds_total", 5))
	n := fw.Node(node)
	assert.Empty(t, n.Labels[wellknown.VerifiedLabel], "node %s labelled before its registration", node)
	assert.Empty(t, n.Labels[karpenter.RegisteredLabel])
	assert.False(t, framework.IsTainted(n), "the startup taint comes with the registration")

	require.NoError(t, k.Resume())
	require.NoError(t, f.WaitReleased(ctx, node))
	waitRunning(t, fw, app, 1)
	waitInitialized(t, dyn, claimOf(tl, node).claim)
	requireNeverHalfReleased(t, f, tl, node)
	// Held: the node had the taint once registered, so a failure would have acted on it.
	assert.Equal(t, string(wellknown.Verified), fw.WaitCondition(node, string(wellknown.Verified)).Reason)
	tl.Log(t)
	t.Logf("history of %s: %v", node, f.History().States(node))
}

// testReplace: the first node fails its checks; with FAILURE_ACTION=replace-node its agent
// deletes the NodeClaim its Node's ownerReference names; Karpenter drains and deletes the
// node and launches another for the pending pod, which is verified and runs it. With another
// key than nodeready's, the creation-time policy puts that taint on instead of the NodePool.
func testReplace(t *testing.T, fw *framework.Framework, dyn dynamic.Interface, key string) {
	ctx := t.Context()
	pool, app := "replace", "replace"
	np, taint := karpenter.NodePool, wellknown.StartupTaint()
	env := map[string]string{"FAILURE_ACTION": "replace-node", "MAX_RETRIES": "2"}
	if key != wellknown.StartupTaint().Key {
		pool, app = "replace-readiness", "replace-readiness"
		np, taint.Key, env["TAINT_KEY"] = karpenter.NodePoolWithoutStartupTaints, key, key
		useTaintKey(t, fw, key)
	}
	f := fw.NewFleet(pool)
	var mu sync.Mutex
	adopted := 0
	require.NoError(t, f.Adopt(ctx, karpenter.NodePoolLabel, func(*corev1.Node) framework.NodeOptions {
		mu.Lock()
		defer mu.Unlock()
		adopted++
		return framework.NodeOptions{BrokenDNS: adopted == 1, Env: env}
	}))
	createNodePool(t, dyn, np(pool, f.Name()))
	tl := watchTimelineTaint(t, fw, dyn, pool, app, taint)
	deploy(t, fw, app, pool, 1)

	first := waitNodes(t, tl, 1)[0]
	firstClaim := claimOf(tl, first).claim
	// Its agent started before the registration and may record the failure before it too;
	// the Event must then not call the node one nodeready does not hold, as it is replaced.
	failed, err := waitEvent(t, fw, first, "VerificationFailed")
	require.NoError(t, err)
	t.Logf("VerificationFailed: %s", failed)
	assert.NotContains(t, failed, "not held by nodeready")
	ev, err := waitEvent(t, fw, first, "ReplacingNode")
	require.NoError(t, err)
	assert.Contains(t, ev, "Deleted NodeClaim "+firstClaim+" because checks failed: dns ")
	err = framework.Poll(t, func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(karpenter.NodeClaims).Get(ctx, firstClaim, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	require.NoError(t, err, "NodeClaim %s of the failing node was not deleted", firstClaim)
	err = framework.Poll(t, func(ctx context.Context) (bool, error) {
		_, err := fw.Client().CoreV1().Nodes().Get(ctx, first, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	require.NoError(t, err, "Karpenter did not remove the failing node %s", first)

	var second string
	err = framework.Poll(t, func(context.Context) (bool, error) {
		for _, l := range tl.Launches() {
			if l.node != "" && l.node != first {
				second = l.node
			}
		}
		return second != "", nil
	})
	require.NoError(t, err, "no replacement node")
	require.NoError(t, f.WaitReleased(ctx, second))
	on := waitRunning(t, fw, app, 1)
	assert.Equal(t, []string{second}, uniqueValues(on))
	waitInitialized(t, dyn, claimOf(tl, second).claim)
	requireNeverHalfReleased(t, f, tl, second)
	assert.Equal(t, firstClaim, claimOf(tl, first).owner, "the failing node's ownerReference named its NodeClaim")
	tl.Log(t)
	assert.Len(t, tl.Claims(), 2, "NodeClaims: the failed one and its replacement: %v", tl.Claims())
}

// waitEvent waits for an Event with the reason about the node and returns its note.
func waitEvent(t *testing.T, fw *framework.Framework, node, reason string) (string, error) {
	t.Helper()
	var note string
	err := framework.Poll(t, func(ctx context.Context) (bool, error) {
		evs, err := fw.Cluster().NodeEvents(ctx, node, reason)
		if err != nil || len(evs) == 0 {
			return false, nil
		}
		note = evs[0].Note
		return true, nil
	})
	return note, err
}

// retaintedAfterRelease reports whether the states show a release, then the startup taint
// again, then another release.
func retaintedAfterRelease(states []framework.NodeState) bool {
	step := 0
	for _, s := range states {
		switch {
		case step == 0 && s.Labelled && !s.Tainted:
			step = 1
		case step == 1 && s.Tainted:
			step = 2
		case step == 2 && s.Labelled && !s.Tainted:
			return true
		}
	}
	return false
}

func uniqueValues(m map[string]string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range m {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

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

// heldRun is what one held launch showed from the API, for the assertions and the table.
type heldRun struct {
	key    string
	needed int
	// While every node was held: the NodeClaims, the status of each launched node's
	// Initialized condition, and the pods bound to a node.
	claimsHeld, boundHeld int
	initializedHeld       []string
	// Once all but the stuck node were healed and released: the pods running, the NodeClaims,
	// and the stuck node's taint and Initialized condition.
	runningStuck, claimsStuck int
	stuckTainted              bool
	stuckInitialized          string
	healedRunning             time.Duration // from healing the checks until two pods ran
	// At the end: the NodeClaims, those Initialized while their Node had the taint, the
	// pods that ran before their node's release, and when the last pod ran.
	claims, initializedTainted, runBeforeRelease int
	allRunning                                   time.Duration // from the workload's creation
}

// heldLaunch: a NodePool without startupTaints, the creation-time policy putting the taint
// with key on every new Node, and agents that remove it. Three pods, one per node; every
// node's checks fail for several agent rounds (Karpenter has them before it through several
// batch windows), then all nodes but one are healed, and after more rounds that one too.
// It asserts what nodeready does whatever Karpenter does, and returns what Karpenter did.
func heldLaunch(t *testing.T, fw *framework.Framework, dyn dynamic.Interface, pool, key string) heldRun {
	ctx := t.Context()
	const replicas = 3
	taint := corev1.Taint{Key: key, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	useTaintKey(t, fw, key)
	f := fw.NewFleet(pool)
	var healed atomic.Bool // nodes adopted from then on pass their checks
	require.NoError(t, f.Adopt(ctx, karpenter.NodePoolLabel, func(*corev1.Node) framework.NodeOptions {
		return framework.NodeOptions{BrokenDNS: !healed.Load(), Env: map[string]string{"TAINT_KEY": key, "MAX_RETRIES": "2"}}
	}))
	np := karpenter.NodePoolWithoutStartupTaints(pool, f.Name())
	// Bounds what a Karpenter that takes held nodes for ready ones launches: three times
	// the nodes needed, of 2 CPUs each.
	require.NoError(t, unstructured.SetNestedField(np.Object, fmt.Sprint(3*replicas*2), "spec", "limits", "cpu"))
	createNodePool(t, dyn, np)
	tl := watchTimelineTaint(t, fw, dyn, pool, pool, taint)
	deploy(t, fw, pool, pool, replicas)
	r := heldRun{key: key, needed: replicas}

	nodes := waitNodes(t, tl, replicas)[:replicas]
	stuck := nodes[replicas-1]
	agents := map[string]string{}
	for _, node := range nodes {
		agent, err := f.WaitAgentRunning(ctx, node)
		require.NoError(t, err)
		agents[node] = agent.Name
		// Rounds go on every RETRY_BACKOFF_MAX (1s): several batch windows.
		require.NoError(t, f.WaitMetric(ctx, agent, "nodeready_rounds_total", 8))
	}
	for _, node := range nodes {
		n := fw.Node(node)
		assert.True(t, tl.tainted(n), "held node %s lost the taint %s: %v", node, key, n.Spec.Taints)
		assert.Empty(t, n.Labels[wellknown.VerifiedLabel], "held node %s", node)
		r.initializedHeld = append(r.initializedHeld, initialized(t, dyn, claimOf(tl, node).claim))
	}
	r.claimsHeld = len(tl.Claims())
	r.boundHeld = len(boundPods(t, fw, pool))

	healedAt := time.Now()
	healed.Store(true)
	for _, node := range f.Nodes() {
		if node != stuck {
			f.DNS(node).SetBroken(false)
		}
	}
	require.NoError(t, f.WaitReleased(ctx, nodes[:replicas-1]...))
	err := framework.Poll(t, func(ctx context.Context) (bool, error) {
		return len(runningPods(t, fw, pool)) >= replicas-1, nil
	})
	require.NoError(t, err, "pods of healed nodes not running")
	r.healedRunning = time.Since(healedAt)
	// More rounds of the stuck node: time for Karpenter to launch for its pending pod.
	agent, err := f.WaitAgentRunning(ctx, stuck)
	require.NoError(t, err)
	require.Equal(t, agents[stuck], agent.Name, "the stuck node's agent was restarted")
	require.NoError(t, f.WaitMetric(ctx, agent, "nodeready_rounds_total", 14))
	r.runningStuck = len(runningPods(t, fw, pool))
	r.claimsStuck = len(tl.Claims())
	r.stuckTainted = tl.tainted(fw.Node(stuck))
	r.stuckInitialized = initialized(t, dyn, claimOf(tl, stuck).claim)

	f.DNS(stuck).SetBroken(false)
	require.NoError(t, f.WaitReleased(ctx, stuck))
	on := waitRunning(t, fw, pool, replicas)
	for _, node := range nodes {
		waitInitialized(t, dyn, claimOf(tl, node).claim)
		requireNeverHalfReleased(t, f, tl, node)
	}
	tl.Log(t)
	r.claims = len(tl.Claims())
	for _, l := range tl.Launches() {
		if l.initializedTainted {
			r.initializedTainted++
		}
	}
	for pod, at := range tl.Running() {
		if _, ok := on[pod]; !ok {
			continue
		}
		if released := claimOf(tl, on[pod]).verified; released.IsZero() || at.Before(released) {
			r.runBeforeRelease++
		}
		r.allRunning = max(r.allRunning, at.Sub(tl.start))
	}
	t.Logf("%+v", r)
	return r
}

// testZeroChange: with the readiness.k8s.io/ key, Karpenter needs no startupTaints: a held
// node is one it is still launching, so the pending pods get exactly their NodeClaims, none
// is Initialized before its node's release, no pod is bound to a held node, and a node whose
// checks keep failing stays uninitialized with its pod pending.
func testZeroChange(t *testing.T, fw *framework.Framework, dyn dynamic.Interface) heldRun {
	r := heldLaunch(t, fw, dyn, "zero-change", karpenter.ReadinessTaintKey)
	assert.Equal(t, r.needed, r.claimsHeld, "NodeClaims while every node was held")
	for i, status := range r.initializedHeld {
		assert.NotEqual(t, "True", status, "NodeClaim %d Initialized while its node was held", i)
	}
	assert.Zero(t, r.boundHeld, "pods bound while every node was held")
	assert.Equal(t, r.needed-1, r.runningStuck, "pods running while one node was held")
	assert.Equal(t, r.needed, r.claimsStuck, "NodeClaims while one node was held")
	assert.True(t, r.stuckTainted, "the stuck node lost its taint")
	assert.NotEqual(t, "True", r.stuckInitialized, "the stuck node's NodeClaim is Initialized")
	assert.Equal(t, r.needed, r.claims, "NodeClaims")
	assert.Zero(t, r.initializedTainted, "NodeClaims Initialized while their node had the taint")
	assert.Zero(t, r.runBeforeRelease, "pods running before their node's release")
	return r
}

// testComparison: the same with nodeready's own key, which Karpenter is not told about (no
// startupTaints). Asserted is only what was seen in every run (5 of 5) and makes it wrong:
// Karpenter counts a held node Initialized as soon as it is Ready, and once it does, launches
// another node for the pod a held node was launched for. It made no extra NodeClaim while
// every node was held (no provisioning pass ran then): that figure is only in the table.
func testComparison(t *testing.T, fw *framework.Framework, dyn dynamic.Interface) heldRun {
	r := heldLaunch(t, fw, dyn, "comparison", wellknown.StartupTaint().Key)
	for i, status := range r.initializedHeld {
		assert.Equal(t, "True", status, "NodeClaim %d Initialized while its node was held", i)
	}
	assert.Positive(t, r.initializedTainted, "NodeClaims Initialized while their node had the taint")
	assert.True(t, r.stuckTainted, "the stuck node lost its taint")
	assert.Equal(t, "True", r.stuckInitialized, "the stuck node's NodeClaim Initialized")
	assert.Greater(t, r.claimsStuck, r.needed, "an extra NodeClaim for the stuck node's pod")
	assert.Zero(t, r.boundHeld, "pods bound while every node was held")
	assert.Zero(t, r.runBeforeRelease, "pods running before their node's release")
	return r
}

// logComparison writes the figures of the runs side by side.
func logComparison(t *testing.T, runs ...heldRun) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%-38s | %-6s | %-14s | %-12s | %-22s | %-21s | %-17s | %-14s | %s\n", "taint key (no startupTaints)", "needed", "claims (held)", "claims (end)", "Initialized while held", "Initialized, tainted", "pods bound (held)", "run after heal", "all running")
	for _, r := range runs {
		held := 0
		for _, s := range r.initializedHeld {
			if s == "True" {
				held++
			}
		}
		fmt.Fprintf(&b, "%-38s | %-6d | %-14d | %-12d | %-22s | %-21d | %-17d | %-14s | %s\n", r.key, r.needed, r.claimsHeld, r.claims,
			fmt.Sprintf("%d of %d", held, len(r.initializedHeld)), r.initializedTainted, r.boundHeld,
			fmt.Sprintf("%.1fs", r.healedRunning.Seconds()), fmt.Sprintf("%.1fs", r.allRunning.Seconds()))
	}
	t.Logf("held launches (three pods, one per node; checks failing ~8 rounds, one node ~14):\n%s", b.String())
}

// boundPods returns the app's pods that are bound to a node.
func boundPods(t *testing.T, fw *framework.Framework, app string) []string {
	t.Helper()
	var out []string
	for _, p := range appPods(t, fw, app) {
		if p.Spec.NodeName != "" {
			out = append(out, p.Name)
		}
	}
	return out
}

// runningPods returns the app's pods that run.
func runningPods(t *testing.T, fw *framework.Framework, app string) []string {
	t.Helper()
	var out []string
	for _, p := range appPods(t, fw, app) {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			out = append(out, p.Name)
		}
	}
	return out
}

func appPods(t *testing.T, fw *framework.Framework, app string) []corev1.Pod {
	t.Helper()
	pods, err := fw.Client().CoreV1().Pods(metav1.NamespaceDefault).List(t.Context(), metav1.ListOptions{LabelSelector: "app=" + app})
	require.NoError(t, err)
	return pods.Items
}

// The policies that name the startup taint key: the creation-time MutatingAdmissionPolicy
// puts the taint on, the own-node ValidatingAdmissionPolicy lets the agent remove only it.
var (
	creationPolicy    = filepath.Join("manifests", "node-creation", "startup-taint.yaml")
	ownNodePolicyFile = filepath.Join("manifests", "04-admission-policy.yaml")
)

const (
	creationPolicyName = "nodeready-startup-taint"
	// probeNode is a Node without kubelet that no DaemonSet and no creation policy serves
	// (no kubernetes.io/os label): the own-node policy is tried on it.
	probeNode = "nodeready-policy-probe"
)

// useTaintKey puts the creation-time policy in force with the startup taint key instead of
// nodeready's, and the own-node policy with it, and waits until both are. Cleanup puts the
// files back as they are (and removes the creation-time policy if it was not there), also
// when the test fails: the other subtests share the cluster.
func useTaintKey(t *testing.T, fw *framework.Framework, key string) {
	t.Helper()
	ctx := t.Context()
	_, err := fw.Client().AdmissionregistrationV1().MutatingAdmissionPolicies().Get(ctx, creationPolicyName, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		require.NoError(t, err)
	}
	hadCreationPolicy := err == nil
	probe := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: probeNode},
		// A taint list to append to, which nothing else changes.
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "example.com/probe", Effect: corev1.TaintEffectNoSchedule}}},
	}
	_, err = fw.Client().CoreV1().Nodes().Create(ctx, probe, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		restore := []string{"apply", "-f", filepath.Join(fw.RepoRoot(), creationPolicy)}
		if !hadCreationPolicy {
			restore = []string{"delete", "--ignore-not-found", "-f", filepath.Join(fw.RepoRoot(), creationPolicy)}
		}
		for _, args := range [][]string{{"apply", "-f", filepath.Join(fw.RepoRoot(), ownNodePolicyFile)}, restore} {
			if out, err := fw.KubectlContext(ctx, args...); err != nil {
				t.Errorf("cleanup: kubectl %s: %v: %s", strings.Join(args, " "), err, out)
			}
		}
		want := ""
		if hadCreationPolicy {
			want = wellknown.StartupTaint().Key
		}
		if err := waitTaintPolicies(ctx, t, fw, want, wellknown.StartupTaint().Key); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		if err := fw.Client().CoreV1().Nodes().Delete(ctx, probeNode, metav1.DeleteOptions{}); err != nil {
			t.Errorf("cleanup: delete node %s: %v", probeNode, err)
		}
	})

	start := time.Now()
	dir := t.TempDir()
	for _, file := range []string{ownNodePolicyFile, creationPolicy} {
		data, err := os.ReadFile(filepath.Join(fw.RepoRoot(), file))
		require.NoError(t, err)
		path := filepath.Join(dir, filepath.Base(file))
		require.NoError(t, os.WriteFile(path, []byte(withTaintKey(t, file, string(data), key)), 0o644))
		out, err := fw.KubectlContext(ctx, "apply", "-f", path)
		require.NoError(t, err, "kubectl apply -f %s (%s): %s", path, file, out)
	}
	require.NoError(t, waitTaintPolicies(ctx, t, fw, key, key))
	t.Logf("policies with taint key %s in force after %v", key, time.Since(start).Round(time.Millisecond))
}

// withTaintKey returns a policy file's text with the startup taint key replaced by key: both
// policies name it once, as a CEL string literal in their variable taintKey.
func withTaintKey(t *testing.T, file, text, key string) string {
	t.Helper()
	literal := func(k string) string { return `"'` + k + `'"` }
	require.Equal(t, 1, strings.Count(text, literal(wellknown.StartupTaint().Key)), "%s names the startup taint key once", file)
	return strings.Replace(text, literal(wellknown.StartupTaint().Key), literal(key), 1)
}

// waitTaintPolicies waits until a Linux Node created now would get the startup taint with
// the key created ("": no startup taint), and the agent may put the taint with the key
// removable on its own node and no other: policies come into force asynchronously after
// they are written.
func waitTaintPolicies(ctx context.Context, t *testing.T, fw *framework.Framework, created, removable string) error {
	t.Helper()
	agent := impersonateAgent(t, fw, probeNode)
	keys := []string{wellknown.StartupTaint().Key, karpenter.ReadinessTaintKey}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		canary := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "nodeready-policy-canary", Labels: map[string]string{corev1.LabelOSStable: "linux"}}}
		n, err := fw.Client().CoreV1().Nodes().Create(ctx, canary, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, nil
		}
		for _, k := range keys {
			has := slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == k })
			if has != (k == created) {
				return false, nil
			}
		}
		for _, k := range keys {
			patch := `[{"op":"add","path":"/spec/taints/-","value":{"key":"` + k + `","value":"true","effect":"NoSchedule"}}]`
			_, err := agent.CoreV1().Nodes().Patch(ctx, probeNode, types.JSONPatchType, []byte(patch), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: wellknown.FieldManager})
			if (err == nil) != (k == removable) {
				return false, nil
			}
		}
		return true, nil
	})
}

// impersonateAgent returns a client that the own-node policy takes for an agent on node.
func impersonateAgent(t *testing.T, fw *framework.Framework, node string) kubernetes.Interface {
	t.Helper()
	cfg := fw.ControlPlane().RESTConfig()
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + framework.Namespace + ":nodeready",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + framework.Namespace, "system:authenticated"},
		Extra:    map[string][]string{"authentication.kubernetes.io/node-name": {node}},
	}
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return client
}
