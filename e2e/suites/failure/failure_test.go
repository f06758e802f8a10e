package failure

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// TestFailure runs the failure tests on one control plane with nodeready installed from
// manifests/, one after another, each with its own fleet. Each sets the failure policy for
// its own nodes only (NodeOptions.Env over the ConfigMap).
func TestFailure(t *testing.T) {
	fw := framework.New(t, framework.Options{})

	fw.Run("kubectl describe node shows the condition and the Events", testDescribe)
	fw.Run("fail-open releases a failing node after FAIL_OPEN_AFTER", testFailOpen)
	fw.Run("replace-node", testReplaceNode)
	fw.Run("a failure action only with the fleet's evidence that the fault is the node's own", testFleetEvidence)
	fw.Run("a release refused by a webhook that is down is reported on the node", testWebhookDown)
	fw.Run("one CheckFailed Event per failing check", testCheckFailedPerCheck)
	fw.Run("long notes are stored", testLongNotes)
	fw.Run("REVERIFY_TAINT puts the startup taint back before checking again", testReverifyTaint)
}

// testDescribe: what `kubectl describe node` shows, and what the API holds, for a verified
// node and for a node whose DNS fails, before and after it heals.
func testDescribe(t *testing.T, fw *framework.Framework) {
	ctx := t.Context()
	f := fw.NewFleet("describe")
	good, bad := f.Name()+"-0", f.Name()+"-1"
	require.NoError(t, f.AddNode(ctx, good, framework.NodeOptions{}))
	require.NoError(t, f.AddNode(ctx, bad, framework.NodeOptions{BrokenDNS: true, Env: map[string]string{"MAX_RETRIES": "2"}}))

	// Verified: condition True/Verified and a Normal Verified Event.
	require.NoError(t, f.WaitReleased(ctx, good))
	cond := fw.WaitCondition(good, string(wellknown.Verified))
	assert.Equal(t, corev1.ConditionTrue, cond.Status)
	assert.Equal(t, "All 5 checks passed", cond.Message)
	verified := fw.WaitEvent(good, "Verified")
	assert.Equal(t, corev1.EventTypeNormal, verified.Type)
	assert.Contains(t, verified.Note, "All 5 checks passed; released in ")
	assert.Equal(t, "nodeready.io/agent", verified.ReportingController)

	out, err := fw.KubectlContext(ctx, "describe", "node", good)
	require.NoError(t, err)
	t.Logf("kubectl describe node %s:\n%s", good, out)
	assert.Equal(t, []string{"True", "Verified", "All 5 checks passed"}, describedCondition(out))
	if msgs := describedEvents(out, "Normal", "Verified"); assert.Len(t, msgs, 1, "Verified Events in the describe output") {
		assert.Contains(t, msgs[0], "All 5 checks passed; released in ")
	}

	// Failing: condition False/ChecksFailed naming the check, a CheckFailed Event naming it
	// and a VerificationFailed Event naming the failure action.
	cond = fw.WaitCondition(bad, string(wellknown.ChecksFailed))
	assert.Equal(t, corev1.ConditionFalse, cond.Status)
	assert.True(t, strings.HasPrefix(cond.Message, "dns "+framework.DNSName+": "), "message names the failing check: %q", cond.Message)
	assert.NotContains(t, cond.Message, "tcp ", "only the failing check")
	checkFailed := fw.WaitEvent(bad, "CheckFailed")
	assert.Equal(t, corev1.EventTypeWarning, checkFailed.Type)
	assert.True(t, strings.HasPrefix(checkFailed.Note, "dns "+framework.DNSName+": "), "note: %q", checkFailed.Note)
	failed := fw.WaitEvent(bad, "VerificationFailed")
	assert.Equal(t, corev1.EventTypeWarning, failed.Type)
	assert.Contains(t, failed.Note, "1 of the checks still failing after 2 rounds")
	assert.Contains(t, failed.Note, "failure action: keep-tainted")
	n := fw.Node(bad)
	assert.True(t, framework.IsTainted(n), "a failing node stays tainted")
	assert.NotContains(t, n.Labels, wellknown.VerifiedLabel)

	out, err = fw.KubectlContext(ctx, "describe", "node", bad)
	require.NoError(t, err)
	t.Logf("kubectl describe node %s:\n%s", bad, out)
	if row := describedCondition(out); assert.Len(t, row, 3, "no %s row in the Conditions table", wellknown.ConditionType) {
		assert.Equal(t, []string{"False", "ChecksFailed"}, row[:2])
		assert.Contains(t, row[2], "dns "+framework.DNSName)
	}
	if msgs := describedEvents(out, "Warning", "CheckFailed"); assert.NotEmpty(t, msgs, "CheckFailed Events in the describe output") {
		assert.Contains(t, msgs[0], "dns "+framework.DNSName)
	}
	if msgs := describedEvents(out, "Warning", "VerificationFailed"); assert.NotEmpty(t, msgs, "VerificationFailed Events in the describe output") {
		assert.Contains(t, msgs[0], "failure action: keep-tainted")
	}
	fw.RequireNoEvent(bad, "Verified")

	// Healed: the same agent releases it, and the condition says so.
	f.DNS(bad).SetBroken(false)
	require.NoError(t, f.WaitReleased(ctx, bad))
	cond = fw.WaitCondition(bad, string(wellknown.Verified))
	assert.Equal(t, corev1.ConditionTrue, cond.Status)
	assert.Equal(t, "All 5 checks passed after a failed verification", cond.Message)
	require.NoError(t, f.WaitAgentsGone(ctx, good, bad))
}

// testFailOpen: with FAILURE_ACTION=fail-open a node whose DNS fails is held until
// FAIL_OPEN_AFTER from its agent's start, not a moment less, and then released with the
// condition False/FailedOpen and a Warning FailedOpen Event. A healthy node of the same
// configuration passes first: the fleet's evidence that the fault is the failing node's own.
func testFailOpen(t *testing.T, fw *framework.Framework) {
	const (
		failOpenAfter = 5 * time.Second
		retryMax      = time.Second // RETRY_BACKOFF_MAX of the harness: the interval after the failure
	)
	ctx := t.Context()
	env := map[string]string{
		"FAILURE_ACTION":  "fail-open",
		"FAIL_OPEN_AFTER": failOpenAfter.String(),
		"MAX_RETRIES":     "2",
	}
	f, healthy := fw.NewFleetWithNode("failopen", framework.NodeOptions{Env: env})
	require.NoError(t, f.WaitReleased(ctx, healthy))
	node := f.Name() + "-broken"
	require.NoError(t, f.AddNode(ctx, node, framework.NodeOptions{BrokenDNS: true, Env: env}))
	require.NoError(t, f.WaitAgentStarted(ctx, node))
	pods := f.PodsOn(node)
	require.Len(t, pods, 1)
	started := pods[0].Started // the kubelet's start of the process: no later than the agent's own

	// Look at the node every 100ms until it is released. A sample that ends before
	// started+FAIL_OPEN_AFTER and shows the node released would prove an early release.
	var releasedAt time.Time
	var held, heldFailed int
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, framework.WaitTimeout, true, func(ctx context.Context) (bool, error) {
		n, err := fw.Client().CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		end := time.Now()
		if framework.IsReleased(n) {
			require.False(t, end.Before(started.Add(failOpenAfter)),
				"node %s seen released %s after its agent started, before FAIL_OPEN_AFTER=%s", node, end.Sub(started), failOpenAfter)
			releasedAt = end
			return true, nil
		}
		held++
		if cond := framework.AgentCondition(n); cond != nil && cond.Reason == string(wellknown.ChecksFailed) {
			heldFailed++
		}
		return false, nil
	})
	require.NoError(t, err, "node %s was never released", node)
	after := releasedAt.Sub(started)
	t.Logf("node %s seen released %s after its agent started; held in %d samples, %d of them with the failure recorded",
		node, after.Round(time.Millisecond), held, heldFailed)
	assert.Positive(t, heldFailed, "the failure was recorded while the node was held")
	assert.Less(t, after, failOpenAfter+3*retryMax+5*time.Second, "released long after FAIL_OPEN_AFTER")

	// The release itself says it failed open: the label's value, in the same write.
	n := fw.Node(node)
	assert.Equal(t, wellknown.FailedOpenValue, n.Labels[wellknown.VerifiedLabel], "the verified label of a failed-open node")
	// The condition is a write of its own to the status, right after the release.
	cond := fw.WaitCondition(node, string(wellknown.FailedOpen))
	assert.Equal(t, corev1.ConditionFalse, cond.Status)
	assert.True(t, strings.HasPrefix(cond.Message, "Released after 5s with failing checks: dns "+framework.DNSName+": "), "message: %q", cond.Message)
	// The agent's own measure, from its start to the release.
	d, err := time.ParseDuration(n.Annotations[wellknown.VerifiedLabel+"-duration"])
	require.NoError(t, err, "annotations %v", n.Annotations)
	assert.GreaterOrEqual(t, d, failOpenAfter)
	assert.NotEmpty(t, n.Annotations[wellknown.VerifiedLabel+"-at"])

	ev := fw.WaitEvent(node, "FailedOpen")
	assert.Equal(t, corev1.EventTypeWarning, ev.Type)
	assert.Contains(t, ev.Note, "Released after 5s with failing checks: dns ")
	fw.WaitEvent(node, "VerificationFailed")
	fw.RequireNoEvent(node, "Verified")
	require.NoError(t, f.WaitAgentsGone(ctx, node))
}

// testReverifyTaint: with REVERIFY_TAINT=true, removing the label of a verified node brings
// a new agent that puts the startup taint back before its checks, then releases the node
// again; the node watch sees every step in that order.
func testReverifyTaint(t *testing.T, fw *framework.Framework) {
	ctx := t.Context()
	f, node := fw.NewFleetWithNode("retaint", framework.NodeOptions{Env: map[string]string{"REVERIFY_TAINT": "true"}})
	require.NoError(t, f.WaitReleased(ctx, node))
	require.NoError(t, f.WaitAgentsGone(ctx, node))
	fw.RequireNoEvent(node, "Reverifying") // a new node is tainted already: nothing to put back

	_, err := fw.KubectlContext(ctx, "label", "node", node, wellknown.VerifiedLabel+"-")
	require.NoError(t, err)
	err = framework.Poll(t, func(context.Context) (bool, error) {
		pods := f.PodsOn(node)
		return len(pods) == 2 && pods[0].Done && pods[1].Done, nil
	})
	require.NoError(t, err, "no second agent ran to its end on %s", node)
	require.NoError(t, f.WaitReleased(ctx, node))
	require.NoError(t, f.WaitAgentsGone(ctx, node))

	h := f.History()
	require.NoError(t, h.WaitLatest(ctx, node, framework.Released))
	assert.Equal(t, []framework.NodeState{
		framework.Unverified, framework.Released, // the first agent
		framework.Unlabelled, // kubectl label node NODE node-ready/verified-
		framework.Unverified, // the second agent put the taint back
		framework.Released,   // and released the node again
	}, h.States(node))

	ev := fw.WaitEvent(node, "Reverifying")
	assert.Equal(t, corev1.EventTypeNormal, ev.Type)
	assert.Contains(t, ev.Note, "Put the startup taint "+wellknown.StartupTaint().Key+"=true:NoSchedule back")
	cond := framework.AgentCondition(fw.Node(node))
	require.NotNil(t, cond)
	assert.Equal(t, string(wellknown.Verified), cond.Reason, "the condition ends Verified, not Verifying")
}
