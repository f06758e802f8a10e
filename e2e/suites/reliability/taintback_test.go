package reliability

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/kubelet"
)

// settleTime is the agents' SETTLE_TIME: the shipped default, which the harness keeps.
const settleTime = 2 * time.Second

// TestStartupTaintComesBack: the instant an agent's release shows (label, no startup taint),
// the test puts the startup taint back, as Karpenter's re-merge of startupTaints at
// registration would; on every second node it does so twice. The agent, which watches its
// node for SETTLE_TIME after the release, notices and removes the taint again before it
// ends, and the node ends verified and untainted, released by that one agent.
func TestStartupTaintComesBack(t *testing.T) {
	const nodes = 8
	e := setup(t)
	f := e.fleet(t, "taintback")
	client := e.fw.Client()
	ctx := t.Context()
	names := f.addNodes(t, "", nodes, framework.NodeOptions{}, nil)

	type undo struct {
		node    string
		readdAt time.Time // the re-add's answer arrived
		undone  nodeVersion
	}
	var mu sync.Mutex
	var undos []undo
	readds := 0
	onEachNode(t, names, func(i int, n string) error {
		var after int64
		for range 1 + i%2 {
			// The first release, or the agent's removal of the taint put back before.
			if _, err := f.versions.waitFor(ctx, n, framework.WaitTimeout, "released", func(v nodeVersion) bool { return v.RV >= after && v.released() }); err != nil {
				return err
			}
			rv, err := retaint(ctx, client, n)
			if err != nil {
				return err
			}
			at := time.Now()
			mu.Lock()
			readds++
			mu.Unlock()
			v, err := f.versions.waitFor(ctx, n, framework.WaitTimeout, "released again", func(v nodeVersion) bool { return v.RV > rv && v.released() })
			if err != nil {
				return err
			}
			mu.Lock()
			undos = append(undos, undo{node: n, readdAt: at, undone: v})
			mu.Unlock()
			after = v.RV
		}
		return f.waitAgentsDone(ctx, n, 1)
	})
	if t.Failed() {
		return
	}

	// Each undo was the agent's: the node's only agent was still running when the taint was
	// gone again, within its settle window.
	var slowest time.Duration
	for _, u := range undos {
		pods := f.PodsOn(u.node)
		require.Len(t, pods, 1, "agent pods on %s: the label keeps new agents away", u.node)
		require.Len(t, pods[0].Exits, 1)
		exit := pods[0].Exits[0]
		assert.True(t, u.undone.At.Before(exit.At), "node %s: taint removed again at %s, after its agent ended at %s", u.node, u.undone.At, exit.At)
		latency := u.undone.At.Sub(u.readdAt)
		slowest = max(slowest, latency)
		assert.Less(t, latency, settleTime, "node %s: the agent took longer than its settle window to remove the taint again", u.node)
	}
	for i, n := range names {
		want := []framework.NodeState{framework.Unverified, framework.Released}
		for range 1 + i%2 {
			want = append(want, framework.NodeState{Labelled: true, Tainted: true, Intact: true}, framework.Released)
		}
		f.assertStates(t, want, n)
		node, err := client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		require.NoError(t, err)
		final := nodeVersion{Taints: node.Spec.Taints, Labels: node.Labels}
		assert.True(t, final.released(), "node %s at the end: %s", n, final)
	}
	exits := f.assertExits(t, names...)
	t.Logf("startup taint put back %d times on %d nodes right after the release; removed again %d times by the same agent, slowest after %s (settle window %s); %d agents, all exit 0",
		readds, nodes, len(undos), slowest.Round(time.Millisecond), settleTime, exits)
}

// retaint puts the startup taint back on a node that shows it released, as Karpenter's
// registration merges startupTaints into the Node: one JSON Patch locked by a test of the
// whole taint list, retried on a lost lock. It returns the resourceVersion it wrote.
func retaint(ctx context.Context, client kubernetes.Interface, node string) (int64, error) {
	return addStartupTaint(ctx, client, node, "e2e-karpenter", func(n *corev1.Node) (jsonPatch, error) {
		if (nodeVersion{Taints: n.Spec.Taints, Labels: n.Labels}).tainted() {
			return nil, fmt.Errorf("node %s is tainted already", node)
		}
		return nil, nil
	})
}

// TestKarpenterRegistration: on a Karpenter-managed node (label karpenter.sh/nodepool) that
// Karpenter has not registered yet (no karpenter.sh/registered=true), the agent's checks
// pass but it leaves the taint, round after round, and waiting is not recorded as a failed
// verification; once Karpenter registers the node, the same agent releases it.
func TestKarpenterRegistration(t *testing.T) {
	const (
		nodes = 3
		// rounds the agents must have refrained for: beyond MAX_RETRIES (5), when a failure
		// would be recorded.
		refrained = 8
	)
	e := setup(t)
	f := e.fleet(t, "karpenter")
	client := e.fw.Client()
	ctx := t.Context()
	names := f.addNodes(t, "", nodes, framework.NodeOptions{Labels: map[string]string{"karpenter.sh/nodepool": "default"}}, nil)

	agents := map[string]kubelet.PodInfo{}
	for _, n := range names {
		pod, err := f.waitRunning(ctx, n, nil)
		require.NoError(t, err)
		agents[n] = pod
		var last samples
		err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, framework.WaitTimeout, true, func(ctx context.Context) (bool, error) {
			s, err := scrapeAgent(ctx, pod.MetricsAddr)
			if err != nil {
				return false, nil
			}
			last = s
			return s[`nodeready_node_patches_total{result="error"}`] >= refrained, nil
		})
		require.NoError(t, err, "agent on %s did not try to release %d times; last metrics %v", n, refrained, last)
		assert.Zero(t, last["nodeready_verification_failures_total"], "agent on %s recorded a failure while it waited for Karpenter", n)
		assert.Zero(t, last["nodeready_verified"], "agent on %s", n)
	}
	for _, n := range names {
		for _, v := range f.versions.of(n) {
			require.True(t, v.tainted() && !v.labelled(), "node %s released before Karpenter registered it: %s", n, v)
			if v.Verdict != nil {
				assert.NotEqual(t, "False", string(v.Verdict.Status), "node %s: condition %s while waiting for Karpenter", n, v.Verdict.Reason)
			}
		}
	}
	assert.Empty(t, nodeEvents(t, ctx, client, names, failureReasons...), "failure Events while waiting for Karpenter")

	for _, n := range names {
		_, err := client.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"karpenter.sh/registered":"true"}}}`), metav1.PatchOptions{FieldManager: "e2e-karpenter"})
		require.NoError(t, err)
	}
	registered := time.Now()
	require.NoError(t, f.WaitReleased(ctx, names...))
	releasedIn := time.Since(registered)
	for _, n := range names {
		require.NoError(t, f.waitAgentsDone(ctx, n, 1))
		pods := f.PodsOn(n)
		require.Len(t, pods, 1, "agent pods on %s", n)
		assert.Equal(t, agents[n].UID, pods[0].UID, "released by the agent that waited")
	}
	f.assertStates(t, []framework.NodeState{framework.Unverified, framework.Released}, names...)
	exits := f.assertExits(t, names...)
	t.Logf("%d Karpenter nodes: the agents refrained for %d+ rounds each with no failure recorded, then released within %s of the registration; %d agents, all exit 0",
		nodes, refrained, releasedIn.Round(100*time.Millisecond), exits)
}
