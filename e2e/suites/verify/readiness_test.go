package verify

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/karpenter"
	"github.com/nodeready/nodeready/internal/wellknown"
)

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
