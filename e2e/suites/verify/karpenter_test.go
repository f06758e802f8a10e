package verify

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

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

	fw.Run("pending pods launch nodes that are verified, then Initialized, then run the pods", func(t *testing.T, fw *framework.Framework) {
		testLaunch(t, fw, dyn)
	})
	fw.Run("held nodes: no extra NodeClaim, not Initialized, until their checks pass", func(t *testing.T, fw *framework.Framework) {
		testHeld(t, fw, dyn)
	})
	fw.Run("an agent that starts before registration waits for it", func(t *testing.T, fw *framework.Framework) {
		testBeforeRegistration(t, fw, dyn, k)
	})
	fw.Run("replace-node deletes the NodeClaim and Karpenter replaces the node", func(t *testing.T, fw *framework.Framework) {
		testReplace(t, fw, dyn, wellknown.StartupTaint().Key)
	})
	// Karpenter told nothing: the taint put on by the creation-time policy, no startupTaints.
	var runs []heldRun
	fw.Run("zero change: a readiness.k8s.io/ taint holds nodes Karpenter counts as launching", func(t *testing.T, fw *framework.Framework) {
		runs = append(runs, testZeroChange(t, fw, dyn))
	})
	fw.Run("comparison: nodeready's own taint without startupTaints", func(t *testing.T, fw *framework.Framework) {
		runs = append(runs, testComparison(t, fw, dyn))
	})
	logComparison(t, runs...)
	fw.Run("replace-node with a readiness.k8s.io/ taint", func(t *testing.T, fw *framework.Framework) {
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
	// A node of the same configuration passes first: the fleet's evidence that the first
	// node's failure is its own, without which replace-node waits (docs/checks.md, "A fault
	// the fleet shares").
	// With another taint key the peer keeps the fleet's default startup taint, which is not
	// its agent's: verified is what counts.
	peers := fw.NewFleet(pool + "-peer")
	peer := peers.Name() + "-0"
	require.NoError(t, peers.AddNode(ctx, peer, framework.NodeOptions{Env: env}))
	err := framework.Poll(t, func(ctx context.Context) (bool, error) {
		n, err := fw.Client().CoreV1().Nodes().Get(ctx, peer, metav1.GetOptions{})
		return err == nil && n.Labels[wellknown.VerifiedLabel] == wellknown.VerifiedLabelValue, nil
	})
	require.NoError(t, err, "the peer %s was not verified", peer)
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
