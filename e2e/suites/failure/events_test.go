package failure

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/internal/wellknown"
)

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
	// A node of the same configuration whose DNS answers the names passes first: the fleet's
	// evidence that the failing nodes' fault is their own.
	healthy := f.Name() + "-ok"
	require.NoError(t, f.AddNode(ctx, healthy, framework.NodeOptions{Env: env("keep-tainted"), Names: names}))
	require.NoError(t, f.WaitReleased(ctx, healthy))
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
