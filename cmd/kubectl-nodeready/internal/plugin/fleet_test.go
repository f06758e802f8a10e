package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/nodeready/nodeready/internal/golden"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// heldInFleet are the nodes of fleet() that carry the startup taint.
var heldInFleet = []string{"a-held", "b-new", "c-misconfigured", "d-reverifying", "j-stranded"}

// TestFleetRelease: --all releases every held node as a single release does, each
// recorded with the user and the time and told by its own Event, and leaves every other
// node unwritten; -v=1 says why each was left.
func TestFleetRelease(t *testing.T) {
	client := newClient(fleet()...)
	before := map[string]*corev1.Node{}
	for _, n := range []string{"e-reverifying-untainted", "f-verified", "g-failed-open", "h-hand-released", "i-not-managed"} {
		before[n] = getNode(t, client, n)
	}
	r := run(t, client, "release", "--all", "-v", "1")
	require.NoError(t, r.err)
	golden.Assert(t, "release-all", r.out)
	golden.Assert(t, "release-all-stderr", r.errOut)

	for _, name := range heldInFleet {
		n := getNode(t, client, name)
		assert.Empty(t, k8sStartupTaints(n), "%s: the startup taint is gone", name)
		assert.Equal(t, "true", n.Labels[wellknown.VerifiedLabel], name)
		assert.Equal(t, "alice@example.com", n.Annotations[wellknown.ReleasedByAnnotation(wellknown.VerifiedLabel)], "%s: who released it", name)
		assert.Equal(t, "2026-05-01T12:00:00Z", n.Annotations[wellknown.ReleasedByTimeAnnotation(wellknown.VerifiedLabel)], name)
	}
	assert.Equal(t, []corev1.Taint{{Key: "example.com/dedicated", Value: "infra", Effect: corev1.TaintEffectPreferNoSchedule}}, getNode(t, client, "a-held").Spec.Taints, "other taints stay")
	for name, n := range before {
		assert.Equal(t, n.ResourceVersion, getNode(t, client, name).ResourceVersion, "%s is not held and was written", name)
	}
	assert.Len(t, patches(t, client), len(heldInFleet), "one write per held node")

	events, err := client.EventsV1().Events(metav1.NamespaceDefault).List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	var about []string
	for _, e := range events.Items {
		assert.Equal(t, string(wellknown.ReleasedByHand), e.Reason)
		about = append(about, e.Regarding.Name)
	}
	assert.ElementsMatch(t, heldInFleet, about, "one ReleasedByHand Event per node")
}

func k8sStartupTaints(n *corev1.Node) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range n.Spec.Taints {
		if t.Key == wellknown.TaintKey {
			out = append(out, t)
		}
	}
	return out
}

// TestFleetReleaseDryRun: --dry-run says what each node would become and writes nothing:
// no patch, no Event; by a selector, only its nodes.
func TestFleetReleaseDryRun(t *testing.T) {
	for _, tc := range []struct {
		golden string
		args   []string
	}{
		{"release-all-dry-run", []string{"release", "--all", "--dry-run"}},
		{"release-selector-dry-run", []string{"release", "-l", "example.com/team=infra", "--dry-run"}},
		{"release-node-dry-run", []string{"release", "a-held", "--dry-run"}},
		{"reverify-all-dry-run", []string{"reverify", "--all", "--dry-run"}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			client := newClient(fleet()...)
			r := run(t, client, tc.args...)
			require.NoError(t, r.err)
			golden.Assert(t, tc.golden, r.out)
			for _, a := range client.Actions() {
				assert.NotContains(t, []string{"patch", "update", "delete"}, a.GetVerb(), "a dry run writes no node")
				if a.GetVerb() == "create" {
					assert.Equal(t, "selfsubjectreviews", a.GetResource().Resource, "a dry run sends no Event")
				}
			}
		})
	}
}

// TestFleetReverify: the label of every labelled node where no agent pod runs goes; a node
// with a running agent pod, or without the label, is left.
func TestFleetReverify(t *testing.T) {
	client := newClient(append(fleet(), agent("nodeready-zz", "f-verified", corev1.PodRunning, 0))...)
	r := run(t, client, "reverify", "--all")
	require.NoError(t, r.err)
	golden.Assert(t, "reverify-all", r.out)
	for _, name := range []string{"g-failed-open", "h-hand-released", "j-stranded"} {
		assert.NotContains(t, getNode(t, client, name).Labels, wellknown.VerifiedLabel, name)
	}
	assert.Equal(t, "true", getNode(t, client, "f-verified").Labels[wellknown.VerifiedLabel], "its agent still runs: left")
	assert.Len(t, patches(t, client), 3)
}

// TestSelectionRefused: a name with a selector, both selections, none, an empty or
// unparsable selector, and --force on more than one named node are refused before any
// request.
func TestSelectionRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"release", "a-held", "-l", "x=y"}, "name a node or choose nodes with --selector or --all, not both"},
		{[]string{"reverify", "f-verified", "--all"}, "name a node or choose nodes with --selector or --all, not both"},
		{[]string{"release", "-l", "x=y", "--all"}, "--selector or --all, not both"},
		{[]string{"release"}, "name a node, or choose nodes with --selector or --all"},
		{[]string{"reverify", "--dry-run"}, "name a node, or choose nodes with --selector or --all"},
		{[]string{"release", "-l", ""}, "--selector is empty: give a label selector, or --all for every node"},
		{[]string{"release", "--all", "--force"}, "--force works on one node by its name only, not with --selector or --all"},
		{[]string{"reverify", "-l", "x=y", "--force"}, "--force works on one node by its name only, not with --selector or --all"},
		{[]string{"release", "-l", "x in (y"}, `--selector "x in (y": unable to parse requirement: found '', expected: ',' or ')'`},
		{[]string{"release", "a", "b"}, "accepts at most 1 arg(s), received 2"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			client := newClient(fleet()...)
			r := run(t, client, tc.args...)
			require.EqualError(t, r.err, tc.err)
			assert.Empty(t, client.Actions(), "refused before any request")
		})
	}
}

// TestFleetNoNodes: a selector that matches no node writes nothing and says so.
func TestFleetNoNodes(t *testing.T) {
	client := newClient(fleet()...)
	r := run(t, client, "release", "-l", "example.com/team=none")
	require.NoError(t, r.err)
	assert.Equal(t, "No nodes found (the nodes of example.com/team=none).\n", r.out)
	assert.Empty(t, patches(t, client))
}

// TestCompletion: NODE completes to the nodes the command is for: release to the held
// ones, reverify to the labelled ones, why to all, by the prefix typed; nothing more once
// a node or a selection is given.
func TestCompletion(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"release", ""}, heldInFleet},
		{[]string{"reverify", ""}, []string{"f-verified", "g-failed-open", "h-hand-released", "j-stranded"}},
		{[]string{"why", "c"}, []string{"c-misconfigured"}},
		{[]string{"why", "a-held", ""}, nil},
		{[]string{"release", "--all", ""}, nil},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := run(t, newClient(fleet()...), append([]string{"__complete"}, tc.args...)...)
			require.NoError(t, r.err)
			lines := strings.Split(strings.TrimSpace(r.out), "\n")
			assert.Equal(t, ":4", lines[len(lines)-1], "no file completion")
			assert.Equal(t, tc.want, nilIfEmpty(lines[:len(lines)-1]))
		})
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// TestVerbosity: -v=1 says which keys the nodes are judged by; no -v says nothing more.
func TestVerbosity(t *testing.T) {
	r := run(t, newClient(fleet()...), "-v", "1")
	require.NoError(t, r.err)
	assert.Equal(t, "Judging nodes by ConfigMap kube-system/nodeready-config: startup taints node-ready/unverified:NoSchedule, verified label node-ready/verified=true\n", r.errOut)
	r = run(t, newClient(fleet()...))
	require.NoError(t, r.err)
	assert.Empty(t, r.errOut)
	r = run(t, newClient(fleet()...), "-v", "-1")
	require.EqualError(t, r.err, "-v -1: use 0 or more")
}

// TestWhyJSON: why -o json is the same story as why's, in a stable form that reads back
// into its type; -o yaml too; another format is refused.
func TestWhyJSON(t *testing.T) {
	objs := append(fleet(),
		event("a1", "a-held", wellknown.AgentController, wellknown.CheckFailed, corev1.EventTypeWarning, "tcp 10.96.0.1:443: dial tcp 10.96.0.1:443: i/o timeout", 20*time.Second, 14),
		event("a2", "a-held", wellknown.AgentController, wellknown.VerificationFailed, corev1.EventTypeWarning, "1 of the checks still failing", 7*time.Minute, 1))
	r := run(t, newClient(objs...), "why", "a-held", "-o", "json", "--events", "1")
	require.NoError(t, r.err)
	golden.Assert(t, "why-a-held-json", r.out)
	var report NodeReport
	require.NoError(t, json.Unmarshal([]byte(r.out), &report))
	assert.Equal(t, "NodeReport", report.Kind)
	assert.Equal(t, Held, report.Node.State)
	assert.Equal(t, 2, report.EventsTotal)
	require.Len(t, report.Events, 1)
	assert.True(t, now.Add(-20*time.Second).Equal(report.Events[0].LastSeen.Time), "last seen %s", report.Events[0].LastSeen)
	report.Events[0].LastSeen = metav1.Time{}
	assert.Equal(t, NodeEvent{Type: "Warning", Reason: "CheckFailed", Count: 14, From: "agent", Note: "tcp 10.96.0.1:443: dial tcp 10.96.0.1:443: i/o timeout"}, report.Events[0])
	assert.Contains(t, report.Next, "kubectl nodeready release a-held")

	r = run(t, newClient(objs...), "why", "a-held", "-o", "yaml")
	require.NoError(t, r.err)
	assert.Contains(t, r.out, "kind: NodeReport\n")
	r = run(t, newClient(objs...), "why", "a-held", "-o", "wide")
	require.EqualError(t, r.err, "-o wide: use json or yaml")
}

// syncBuffer is a buffer the watch writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestStatusWatch: --watch prints the table, then, from one watch and no second LIST, the
// row of a node whose state changes, a line for a node deleted and the summary when it
// changes; a change that no row shows prints nothing. It ends with its context.
func TestStatusWatch(t *testing.T) {
	client := newClient(fleet()...)
	var out, errOut syncBuffer
	o := &Options{
		streams:     genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut},
		configFlags: newKubeconfigFlags(),
		now:         func() time.Time { return now },
		newClient:   func() (Client, error) { return asClient(client), nil },
	}
	cmd := o.command("test")
	cmd.SetArgs([]string{"status", "--watch"})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	waitFor := func(s string) {
		t.Helper()
		require.Eventually(t, func() bool { return strings.Contains(out.String(), s) }, 5*time.Second, 10*time.Millisecond, "waiting for %q in:\n%s", s, out.String())
	}
	waitFor("longest hold: j-stranded, 6h\n")
	initial := out.String()

	// A change no row shows (a heartbeat) prints nothing; then b-new is released.
	n := getNode(t, client, "b-new")
	n.Labels["example.com/unrelated"] = "x"
	_, err := client.CoreV1().Nodes().Update(t.Context(), n, metav1.UpdateOptions{})
	require.NoError(t, err)
	n = getNode(t, client, "b-new")
	n.Spec.Taints = nil
	n.Labels[wellknown.VerifiedLabel] = "true"
	_, err = client.CoreV1().Nodes().Update(t.Context(), n, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitFor("2 held,")
	require.NoError(t, client.CoreV1().Nodes().Delete(t.Context(), "i-not-managed", metav1.DeleteOptions{}))
	waitFor("node/i-not-managed deleted\n")
	waitFor("9 nodes:")
	cancel()
	require.NoError(t, <-done)

	golden.Assert(t, "status-watch", strings.TrimPrefix(out.String(), initial))
	var lists, watches int
	for _, a := range client.Actions() {
		if a.GetResource().Resource == "nodes" {
			switch a.GetVerb() {
			case "list":
				lists++
			case "watch":
				watches++
			}
		}
	}
	assert.Equal(t, 1, lists, "one LIST, then the watch")
	assert.Equal(t, 1, watches)

	r := run(t, newClient(fleet()...), "status", "--watch", "-o", "json")
	require.EqualError(t, r.err, "--watch prints the table: leave out -o json")
	r = run(t, newClient(), "status", "--watch", "--template", "{{.kind}}")
	require.EqualError(t, r.err, "--watch prints the table: leave out --template")
}

var _ runtime.Object = (*NodeReport)(nil)
