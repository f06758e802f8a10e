package verify

import (
	"context"
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/internal/golden"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// testPlugin: `kubectl nodeready`, the built binary, as a user runs it against the API
// server, on a node in each state the agents leave: verified, held by a failing check,
// misconfigured, failed open, re-verifying with its startup taint back, released by hand,
// and one nodeready does not serve. status tells each (golden, ages and times normalised),
// why tells a held node's condition, Events and agent; release frees a held node in one
// write that keeps the node's other taints and records the user the API server names, and
// refuses a verified one; reverify brings an agent back, which puts the startup taint back
// (REVERIFY_TAINT); why -o json tells a held node; release -l, after its dry run, releases
// every held node of the fleet while status --watch prints each as it changes.
func testPlugin(t *testing.T, fw *framework.Framework) {
	ctx := t.Context()
	// REVERIFY_TAINT from the ConfigMap, as an operator sets it: the agents read it, and so
	// does the plugin, to say what a re-verification does.
	require.NoError(t, fw.Cluster().ApplyConfig(ctx, map[string]string{"REVERIFY_TAINT": "true"}))
	t.Cleanup(func() { _ = fw.Cluster().ApplyConfig(context.WithoutCancel(ctx), nil) })
	kubectl := fw.Plugin("alice@example.com", "system:masters")

	f := fw.NewFleet("plugin")
	name := func(s string) string { return f.Name() + "-" + s }
	broken := framework.NodeOptions{BrokenDNS: true}
	// fail-open acts only on evidence that the fault is the node's own: a node of the same
	// configuration that passed. The verified node is that node.
	failOpen := map[string]string{"FAILURE_ACTION": "fail-open", "FAIL_OPEN_AFTER": "1s"}
	nodes := map[string]framework.NodeOptions{
		"verified":      {Env: failOpen},
		"reverifying":   {},
		"held":          broken,
		"released":      broken,
		"misconfigured": {Env: map[string]string{"CHECKS": "daemonsets", "DAEMONSETS": "kube-system/cilium"}},
		"failed-open":   {BrokenDNS: true, Env: failOpen},
		// Not a node nodeready serves: the DaemonSet's affinity asks for Linux.
		"unmanaged": {Untainted: true, Labels: map[string]string{"kubernetes.io/os": "windows"}},
	}
	// The verified node first, released before the failing one of its configuration starts;
	// then the others in the order of their names: held before misconfigured, so the golden's
	// longest hold is held's, not whichever the map gave first when both fall in one second.
	require.NoError(t, f.AddNode(ctx, name("verified"), nodes["verified"]))
	require.NoError(t, f.WaitReleased(ctx, name("verified")))
	delete(nodes, "verified")
	for _, s := range slices.Sorted(maps.Keys(nodes)) {
		require.NoError(t, f.AddNode(ctx, name(s), nodes[s]))
	}
	require.NoError(t, f.WaitReleased(ctx, name("verified"), name("reverifying")))
	fw.WaitCondition(name("held"), string(wellknown.ChecksFailed))
	fw.WaitCondition(name("released"), string(wellknown.ChecksFailed))
	fw.WaitCondition(name("misconfigured"), string(wellknown.Misconfigured))
	fw.WaitCondition(name("failed-open"), string(wellknown.FailedOpen))
	require.NoError(t, f.WaitAgentsGone(ctx, name("verified"), name("reverifying"), name("failed-open")))

	// release refuses a node nothing holds, and writes nothing to it.
	before := fw.Node(name("verified"))
	r := kubectl.Run("release", name("verified"))
	assert.Equal(t, 3, r.Code, "exit code of a refusal")
	assert.Equal(t, "error: refused: node plugin-verified is released already (node-ready/verified=true, no startup taint: verified)\n", r.Stderr)
	// What release writes, not the resourceVersion, which the kubelet's heartbeat moves.
	after := fw.Node(name("verified"))
	assert.Equal(t, before.Labels, after.Labels, "the refused node was labelled")
	assert.Equal(t, before.Annotations, after.Annotations, "the refused node was annotated")
	assert.Equal(t, before.Spec.Taints, after.Spec.Taints, "the refused node's taints were written")

	// release frees a held node: the startup taint off, the other taints kept, the label on,
	// the user the API server names recorded; its agent goes.
	out := kubectl.MustRun("release", name("released"))
	assert.Regexp(t, `^node/plugin-released released by hand: removed node-ready/unverified=true:NoSchedule, labelled node-ready/verified=true, recorded as released by alice@example.com at \S+Z\n$`, out)
	n := fw.Node(name("released"))
	assert.ElementsMatch(t, framework.ForeignTaints, n.Spec.Taints, "only the startup taint is gone")
	assert.Equal(t, wellknown.VerifiedLabelValue, n.Labels[wellknown.VerifiedLabel])
	assert.Equal(t, "alice@example.com", n.Annotations[wellknown.ReleasedByAnnotation(wellknown.VerifiedLabel)])
	assert.Equal(t, wellknown.PluginFieldManager, n.ManagedFields[len(n.ManagedFields)-1].Manager, "written under the plugin's own name")
	require.NoError(t, f.WaitAgentsGone(ctx, name("released")))
	assert.Contains(t, fw.WaitEvent(name("released"), string(wellknown.ReleasedByHand)).Note, "Released by hand by alice@example.com")

	// reverify brings an agent back, which puts the startup taint back before it checks.
	f.DNS(name("reverifying")).SetBroken(true)
	out = kubectl.MustRun("reverify", name("reverifying"))
	assert.Equal(t, "node/plugin-reverifying: label node-ready/verified removed, the DaemonSet runs an agent there again. REVERIFY_TAINT is true and nodeready verified this node before (node-ready/verified-at): the agent puts the startup taint back first, so no new workloads land there until it is verified\n", out)
	fw.WaitCondition(name("reverifying"), string(wellknown.ChecksFailed))
	assert.True(t, framework.IsTainted(fw.Node(name("reverifying"))), "the startup taint is back")

	selector := "--selector=" + framework.FleetLabel + "=" + f.Name()
	status := kubectl.MustRun("status", selector)
	golden.Assert(t, "plugin-status", normalise(status))

	var s struct {
		Nodes []struct {
			Name  string `json:"name"`
			State string `json:"state"`
		} `json:"nodes"`
		Summary struct {
			LongestHold struct {
				Node string `json:"node"`
			} `json:"longestHold"`
		} `json:"summary"`
	}
	require.NoError(t, json.Unmarshal([]byte(kubectl.MustRun("status", selector, "-o", "json")), &s))
	states := map[string]string{}
	for _, n := range s.Nodes {
		states[n.Name] = n.State
	}
	assert.Equal(t, map[string]string{
		name("verified"): "verified", name("reverifying"): "re-verifying", name("held"): "held", name("released"): "hand-released",
		name("misconfigured"): "misconfigured", name("failed-open"): "failed-open", name("unmanaged"): "not-managed",
	}, states)

	golden.Assert(t, "plugin-why", normalise(kubectl.MustRun("why", name("held"))))
	var report struct {
		Kind string `json:"kind"`
		Node struct {
			State  string `json:"state"`
			Reason string `json:"reason"`
		} `json:"node"`
		Events []struct {
			Reason string `json:"reason"`
		} `json:"events"`
	}
	require.NoError(t, json.Unmarshal([]byte(kubectl.MustRun("why", name("held"), "-o", "json")), &report))
	assert.Equal(t, "NodeReport", report.Kind)
	assert.Equal(t, "held", report.Node.State)
	assert.Equal(t, string(wellknown.ChecksFailed), report.Node.Reason)
	require.NotEmpty(t, report.Events)

	// The fleet-wide break-glass, watched: a dry run writes nothing; then every node of the
	// fleet that a startup taint holds is released, each recorded with the user, and the
	// watch prints each released row. The others are left as they are.
	held := []string{name("held"), name("misconfigured"), name("reverifying")}
	watched, stop := kubectl.Start("status", selector, "--watch")
	require.Eventually(t, func() bool { return strings.Contains(watched(), "longest hold: "+name("held")) }, time.Minute, 100*time.Millisecond, "the watch's table:\n%s", watched())
	golden.Assert(t, "plugin-release-dry-run", normalise(kubectl.MustRun("release", selector, "--dry-run")))
	for _, h := range held {
		n := fw.Node(h)
		assert.True(t, framework.IsTainted(n), "%s: the dry run released it", h)
		assert.NotContains(t, n.Annotations, wellknown.ReleasedByAnnotation(wellknown.VerifiedLabel), "%s: the dry run wrote it", h)
	}
	out = kubectl.MustRun("release", selector)
	assert.Contains(t, out, "7 nodes (the nodes of "+framework.FleetLabel+"="+f.Name()+"): 3 released, 4 left as they are")
	for _, h := range held {
		n := fw.Node(h)
		assert.False(t, framework.IsTainted(n), "%s: still tainted", h)
		assert.Equal(t, "alice@example.com", n.Annotations[wellknown.ReleasedByAnnotation(wellknown.VerifiedLabel)], "%s: who released it", h)
		assert.Contains(t, fw.WaitEvent(h, string(wellknown.ReleasedByHand)).Note, "Released by hand by alice@example.com")
	}
	for _, h := range held {
		row := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(h) + `\s+hand-released\s`)
		require.Eventually(t, func() bool { return row.MatchString(watched()) }, time.Minute, 100*time.Millisecond, "the watch printed no hand-released row of %s:\n%s", h, watched())
	}
	stop()
}

var (
	// ageCell is an age as the plugin prints it (kubectl's), alone between two columns.
	ageCell = regexp.MustCompile(`^(\d+[smhdy])+$`)
	// times and ages in sentences; agent pods' generated names; Event counts and ports.
	rfc3339  = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)
	ageWords = regexp.MustCompile(`\b(\d+(\.\d+)?(ms|[smhdy]))+( ago)?\b`)
	podName  = regexp.MustCompile(`nodeready-[a-z0-9]{5}\b`)
	port     = regexp.MustCompile(`(127\.0\.0\.1|\[::1\]):\d+`)
	columns  = regexp.MustCompile(`\s{2,}`)
	count    = regexp.MustCompile(`^\d+$`)
)

// normalise makes the plugin's output comparable across runs: columns become " | "-separated
// fields (the widths follow the ages), and every age, time, generated pod name, count and
// loopback port becomes a placeholder.
func normalise(out string) string {
	var b strings.Builder
	for line := range strings.Lines(out) {
		fields := columns.Split(strings.TrimSpace(line), -1)
		for i, f := range fields {
			switch {
			case ageCell.MatchString(f):
				f = "<age>"
			case count.MatchString(f) && i > 0:
				f = "<n>"
			}
			f = rfc3339.ReplaceAllString(f, "<time>")
			f = podName.ReplaceAllString(f, "nodeready-<pod>")
			f = port.ReplaceAllString(f, "$1:<port>")
			f = ageWords.ReplaceAllString(f, "<age>$4")
			fields[i] = f
		}
		b.WriteString(strings.Join(fields, " | ") + "\n")
	}
	return b.String()
}
