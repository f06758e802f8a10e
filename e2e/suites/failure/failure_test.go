package failure

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

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
	assert.Equal(t, "All 4 checks passed", cond.Message)
	verified := fw.WaitEvent(good, "Verified")
	assert.Equal(t, corev1.EventTypeNormal, verified.Type)
	assert.Contains(t, verified.Note, "All 4 checks passed; released in ")
	assert.Equal(t, "nodeready.io/agent", verified.ReportingController)

	out, err := fw.KubectlContext(ctx, "describe", "node", good)
	require.NoError(t, err)
	t.Logf("kubectl describe node %s:\n%s", good, out)
	assert.Equal(t, []string{"True", "Verified", "All 4 checks passed"}, describedCondition(out))
	if msgs := describedEvents(out, "Normal", "Verified"); assert.Len(t, msgs, 1, "Verified Events in the describe output") {
		assert.Contains(t, msgs[0], "All 4 checks passed; released in ")
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
	assert.Equal(t, "All 4 checks passed after a failed verification", cond.Message)
	require.NoError(t, f.WaitAgentsGone(ctx, good, bad))
}

// testFailOpen: with FAILURE_ACTION=fail-open a node whose DNS fails is held until
// FAIL_OPEN_AFTER from its agent's start, not a moment less, and then released with the
// condition False/FailedOpen and a Warning FailedOpen Event.
func testFailOpen(t *testing.T, fw *framework.Framework) {
	const (
		failOpenAfter = 5 * time.Second
		retryMax      = time.Second // RETRY_BACKOFF_MAX of the harness: the interval after the failure
	)
	ctx := t.Context()
	f, node := fw.NewFleetWithNode("failopen", framework.NodeOptions{BrokenDNS: true, Env: map[string]string{
		"FAILURE_ACTION":  "fail-open",
		"FAIL_OPEN_AFTER": failOpenAfter.String(),
		"MAX_RETRIES":     "2",
	}})
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

// rfc1123z matches the times in `kubectl describe node`'s Conditions table.
const rfc1123z = `\w{3}, \d{2} \w{3} \d{4} \d{2}:\d{2}:\d{2} [+-]\d{4}`

// describedCondition returns the status, reason and message of the agent's condition in the
// Conditions table of `kubectl describe node`, or nil when the table has no such row.
func describedCondition(out string) []string {
	re := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(string(wellknown.ConditionType)) +
		`\s+(True|False|Unknown)\s+` + rfc1123z + `\s+` + rfc1123z + `\s+(\S+)\s+(.*?)\s*$`)
	m := re.FindStringSubmatch(out)
	if m == nil {
		return nil
	}
	return m[1:]
}

// describedEvents returns the messages of the Events of type and reason that `kubectl
// describe node` lists as sent by the agent.
func describedEvents(out, typ, reason string) []string {
	re := regexp.MustCompile(`(?m)^\s*` + typ + `\s+` + regexp.QuoteMeta(reason) + `\s+.*\snodeready\.io/agent\s+(.*?)\s*$`)
	var msgs []string
	for _, m := range re.FindAllStringSubmatch(out, -1) {
		msgs = append(msgs, m[1])
	}
	return msgs
}

// noteLimit is the longest note the API server accepts in an events.k8s.io/v1 Event.
const noteLimit = 1024

// testCheckFailedPerCheck: with three failing checks the API holds three CheckFailed Events,
// one per check, each naming its check, each seen once.
func testCheckFailedPerCheck(t *testing.T, fw *framework.Framework) {
	ctx := t.Context()
	f := fw.NewFleet("perchecks")
	node := f.Name() + "-0"
	names := []string{framework.DNSName, "a.nodeready.example", "b.nodeready.example"}
	require.NoError(t, f.AddNode(ctx, node, framework.NodeOptions{BrokenDNS: true, Env: map[string]string{
		"DNS_TEST_DOMAINS": strings.Join(names, ","),
		"MAX_RETRIES":      "2",
	}}))
	fw.WaitEvent(node, "VerificationFailed")

	var found []eventsv1.Event
	err := framework.Poll(t, func(ctx context.Context) (bool, error) {
		var err error
		found, err = fw.Cluster().NodeEvents(ctx, node, "CheckFailed")
		return err == nil && len(found) >= len(names), nil
	})
	require.NoError(t, err, "CheckFailed Events about %s: %s", node, notes(found))
	require.Len(t, found, len(names), "one CheckFailed Event per failing check: %s", notes(found))
	var checks []string
	for _, e := range found {
		assert.Equal(t, corev1.EventTypeWarning, e.Type)
		assert.Nil(t, e.Series, "CheckFailed %q counted as a repeat", e.Note)
		check, _, ok := strings.Cut(e.Note, ": ")
		require.True(t, ok, "note does not name its check: %q", e.Note)
		checks = append(checks, check)
	}
	slices.Sort(checks)
	want := []string{"dns " + names[1], "dns " + names[2], "dns " + names[0]}
	slices.Sort(want)
	assert.Equal(t, want, checks)
}

// testLongNotes: six failing checks with long messages. The Warnings that matter most when
// many checks fail, FailedOpen and ReplacingNode, are accepted by the API server (an
// events.k8s.io/v1 note longer than 1024 bytes is refused), and the condition message stays
// within the same limit.
func testLongNotes(t *testing.T, fw *framework.Framework) {
	ctx := t.Context()
	_, err := fw.KubectlContext(ctx, "apply", "-f", filepath.Join(fw.RepoRoot(), "manifests", "replace-node"))
	require.NoError(t, err)
	var names []string
	label := strings.Repeat("x", 60)
	for i := range 6 {
		names = append(names, fmt.Sprintf("check-%d.%s.%s.%s.nodeready.example", i, label, label, label))
	}
	env := func(action string) map[string]string {
		return map[string]string{
			"DNS_TEST_DOMAINS": strings.Join(names, ","),
			"MAX_RETRIES":      "2",
			"FAILURE_ACTION":   action,
			"FAIL_OPEN_AFTER":  "2s",
		}
	}
	f := fw.NewFleet("longnotes")
	open, replaced := f.Name()+"-0", f.Name()+"-1"
	require.NoError(t, f.AddNode(ctx, open, framework.NodeOptions{BrokenDNS: true, Env: env("fail-open")}))
	require.NoError(t, f.AddNode(ctx, replaced, framework.NodeOptions{BrokenDNS: true, Env: env("replace-node")}))

	// fail-open: released, the condition says so within the limit, the Event is stored.
	require.NoError(t, f.WaitReleased(ctx, open))
	cond := fw.WaitCondition(open, string(wellknown.FailedOpen))
	assert.LessOrEqual(t, len(cond.Message), noteLimit, "condition message of %d bytes", len(cond.Message))
	assert.True(t, strings.HasPrefix(cond.Message, "Released after 2s with failing checks: dns "+names[0]), "message: %.200q", cond.Message)
	ev := fw.WaitEvent(open, "FailedOpen")
	assert.Equal(t, corev1.EventTypeWarning, ev.Type)
	assert.LessOrEqual(t, len(ev.Note), noteLimit)
	assert.True(t, strings.HasPrefix(ev.Note, "Released after 2s with failing checks: dns "+names[0]), "note: %.200q", ev.Note)
	fw.WaitEvent(open, "VerificationFailed")

	// replace-node (no NodeClaim): the Node is deleted and the Event is stored.
	err = framework.Poll(t, func(ctx context.Context) (bool, error) {
		_, err := fw.Client().CoreV1().Nodes().Get(ctx, replaced, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	require.NoError(t, err, "the failing node %s was not deleted", replaced)
	ev = fw.WaitEvent(replaced, "ReplacingNode")
	assert.LessOrEqual(t, len(ev.Note), noteLimit)
	assert.True(t, strings.HasPrefix(ev.Note, "Deleted Node "+replaced+" because checks failed: dns "+names[0]), "note: %.200q", ev.Note)
	fw.WaitEvent(replaced, "VerificationFailed")
	require.NoError(t, f.WaitAgentsGone(ctx, open))
}

// notes lists the notes of Events, for a failure message.
func notes(evs []eventsv1.Event) string {
	var out []string
	for _, e := range evs {
		n := "<nil>"
		if e.Series != nil {
			n = fmt.Sprint(e.Series.Count)
		}
		out = append(out, fmt.Sprintf("%q (series %s)", e.Note, n))
	}
	return "[" + strings.Join(out, ", ") + "]"
}

// testWebhookDown: a validating webhook on Node UPDATE with failurePolicy Fail whose server is
// down (its URL is a closed port on loopback) makes the real API server answer every release
// 500 "failed calling webhook". The agent reports it on the node (condition Misconfigured with
// the server's message) and in a ReleaseFailed Event instead of waiting in silence, and
// releases the node once the webhook is gone.
func testWebhookDown(t *testing.T, fw *framework.Framework) {
	ctx, client := t.Context(), fw.Client()
	f := fw.NewFleet("webhook")
	webhook := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "nodeready-e2e-down"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "nodes.down.example.com",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/validate")},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"nodes"}}}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](2),
			// Only this fleet's nodes: the other tests' nodes keep working.
			ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{framework.FleetLabel: f.Name()}},
		}},
	}
	_, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, webhook, metav1.CreateOptions{})
	require.NoError(t, err)
	removed := false
	remove := func() {
		if removed {
			return
		}
		removed = true
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, webhook.Name, metav1.DeleteOptions{}))
	}
	t.Cleanup(remove)

	node := f.Name() + "-0"
	require.NoError(t, f.AddNode(ctx, node, framework.NodeOptions{Env: map[string]string{"MAX_RETRIES": "2"}}))
	cond := fw.WaitCondition(node, string(wellknown.Misconfigured))
	assert.Contains(t, cond.Message, "failed calling webhook")
	assert.Contains(t, cond.Message, "nodes.down.example.com")
	ev := fw.WaitEvent(node, "ReleaseFailed")
	assert.Contains(t, ev.Note, "failed calling webhook")
	require.True(t, framework.IsTainted(fw.Node(node)), "held while the release fails")

	// Another webhook fails now: another error, which client-go's recorder, writing to the
	// real API server, stores as an Event of its own instead of folding it into the first.
	current, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, webhook.Name, metav1.GetOptions{})
	require.NoError(t, err)
	current.Webhooks[0].Name = "nodes.other.example.com"
	_, err = client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, current, metav1.UpdateOptions{})
	require.NoError(t, err)
	var notes []string
	err = framework.Poll(t, func(ctx context.Context) (bool, error) {
		evs, err := fw.Cluster().NodeEvents(ctx, node, "ReleaseFailed")
		if err != nil {
			return false, nil
		}
		notes = notes[:0]
		for _, e := range evs {
			notes = append(notes, e.Note)
		}
		return len(evs) == 2, nil
	})
	require.NoError(t, err, "want a ReleaseFailed Event per distinct error; have %q", notes)
	assert.True(t, slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, "nodes.down.example.com") }), "%q", notes)
	assert.True(t, slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, "nodes.other.example.com") }), "%q", notes)
	cond = fw.WaitCondition(node, string(wellknown.Misconfigured))
	assert.Contains(t, cond.Message, "nodes.other.example.com", "the condition follows the latest round")

	// The way out of the deadlock (README: Runbook): the webhook goes, the node is released.
	remove()
	require.NoError(t, f.WaitReleased(ctx, node))
	fw.WaitCondition(node, string(wellknown.Verified))
}
