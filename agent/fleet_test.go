package agent

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/nodeready/nodeready/internal/config"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// fleetNode is another node of the fleet as its agent left it: verified at released (or
// failing checks, when failing is set), under the configuration fingerprint, its config
// label written in the hour of at.
func fleetNode(name, fingerprint string, at time.Time, failing string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{wellknown.ConfigLabel(wellknown.VerifiedLabel): fingerprint + "." + hour(at)}}}
	if failing == "" {
		n.Labels[wellknown.VerifiedLabel] = wellknown.VerifiedLabelValue
		n.Annotations = map[string]string{wellknown.ReleasedAtAnnotation(wellknown.VerifiedLabel): at.UTC().Format(time.RFC3339)}
		return n
	}
	n.Spec.Taints = []corev1.Taint{startupTaint}
	n.Annotations = map[string]string{wellknown.FailingAnnotation(wellknown.VerifiedLabel): failing,
		wellknown.FailedAtAnnotation(wellknown.VerifiedLabel): at.UTC().Format(time.RFC3339)}
	return n
}

// peered adds to c a node that a's configuration verified a minute ago, the evidence a
// failure action needs that a fault is the node's own, and makes a read the fleet every
// round: the tests of the action itself.
func (c *cluster) peered(t *testing.T, a *Agent) *Agent {
	t.Helper()
	c.addNode(t, fleetNode("node-passed", a.fleet.fingerprint, time.Now().Add(-time.Minute), ""))
	a.fleet.every = 0
	return a
}

// addNode adds another node to the cluster.
func (c *cluster) addNode(t *testing.T, n *corev1.Node) {
	t.Helper()
	require.NoError(t, c.Tracker().Add(n))
}

// TestEvidenceTellsTheNodesFaultFromTheFleets is the rule of docs/checks.md ("Whose fault
// it is"): a failure action needs a node of the same configuration that passed within the
// window, and fewer than 3 nodes failing the same check or less than SHARED_FAULT_PERCENTAGE
// of those that failed it or passed.
func TestEvidenceTellsTheNodesFaultFromTheFleets(t *testing.T) {
	now := time.Now()
	f := &fleet{node: nodeName, fingerprint: "0123456789", label: wellknown.VerifiedLabel, value: wellknown.VerifiedLabelValue,
		window: 10 * time.Minute, percentage: 55}
	passed := func(name string, ago time.Duration) corev1.Node {
		return *fleetNode(name, f.fingerprint, now.Add(-ago), "")
	}
	failingDNS := func(name string) corev1.Node { return *fleetNode(name, f.fingerprint, now, "dns,tcp") }
	for _, tt := range []struct {
		name   string
		fleet  []corev1.Node
		shared string // a part of why the fault looks shared; "" when it is the node's own
	}{
		{"one node joining alone", nil, "no node of this configuration passed in the last 10m0s"},
		{"a lone broken node among healthy ones", []corev1.Node{passed("b", time.Minute), passed("c", 2*time.Minute)}, ""},
		{"the only passes are older than the window", []corev1.Node{passed("b", 11*time.Minute)}, "no node of this configuration passed"},
		{"two failing beside one that passed", []corev1.Node{passed("b", time.Minute), failingDNS("c")}, ""},
		{"three failing beside one that passed", []corev1.Node{passed("b", time.Minute), failingDNS("c"), failingDNS("d")},
			"3 of the 4 nodes of this configuration that failed dns or passed in the last 10m0s fail it"},
		{"three failing beside three that passed", []corev1.Node{passed("b", time.Minute), passed("c", time.Minute), passed("d", time.Minute),
			failingDNS("e"), failingDNS("f")}, ""},
		{"nodes failing another check do not count", []corev1.Node{passed("b", time.Minute), *fleetNode("c", f.fingerprint, now, "http"),
			*fleetNode("d", f.fingerprint, now, "http")}, ""},
		{"failed open still failed", []corev1.Node{passed("b", time.Minute), failedOpen(failingDNS("c")), failedOpen(failingDNS("d"))}, "3 of the 4"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var items []metav1.PartialObjectMetadata
			for _, n := range tt.fleet {
				items = append(items, metav1.PartialObjectMetadata{ObjectMeta: n.ObjectMeta})
			}
			why := f.count(items, []string{"dns"}, now).shared([]string{"dns"}, f.window, f.percentage)
			if tt.shared == "" {
				assert.Empty(t, why)
			} else {
				assert.Contains(t, why, tt.shared)
			}
		})
	}
}

func failedOpen(n corev1.Node) corev1.Node {
	n.Labels[wellknown.VerifiedLabel] = wellknown.FailedOpenValue
	return n
}

// TestFleetReadSelectsTheConfigurationsRecentHours: the read selects, by the config label,
// the nodes of this configuration written in the window or the hour before it, not every
// node the configuration ever verified.
func TestFleetReadSelectsTheConfigurationsRecentHours(t *testing.T) {
	f := &fleet{fingerprint: "0123456789", label: wellknown.VerifiedLabel, value: wellknown.VerifiedLabelValue, window: 10 * time.Minute}
	now := time.Date(2026, 12, 4, 11, 5, 0, 0, time.UTC)
	assert.Equal(t, "node-ready/verified=true,node-ready/verified-config in (0123456789.2026120409,0123456789.2026120410,0123456789.2026120411)",
		f.selector(now, selection.Equals).String())
	assert.Equal(t, "node-ready/verified!=true,node-ready/verified-config in (0123456789.2026120409,0123456789.2026120410,0123456789.2026120411)",
		f.selector(now, selection.NotEquals).String())
	assert.Equal(t, "dns,podnetwork", failingValue([]string{"podnetwork", "dns", "dns"}))
	long := []string{"conditions", "daemonsets", "endpoints", "podnetwork", "resources", "apiserver", "command"}
	assert.LessOrEqual(t, len(failingValue(long)), 64, "the admission policy bounds the annotation")
}

// TestSharedFaultWithholdsTheAction: replace-node on a node whose checks fail, with no
// node of its configuration that passed, deletes nothing; its condition, an Event and the
// metric say the fault looks shared, and the node records what fails for the others. Once
// a node of the configuration passes, the action goes ahead.
func TestSharedFaultWithholdsTheAction(t *testing.T) {
	c, dyn := newCluster(ownedNode()), nodeClaims()
	a := newAgent(t, Clients{Kube: c.kube(), Dynamic: dyn}, failing, map[string]string{"MAX_RETRIES": "1", "FAILURE_ACTION": config.ReplaceNode})
	a.fleet.every = 0
	r := start(t, a)

	waitFor(t, "withheld", func() bool { return c.condition(t).Reason == string(wellknown.SharedFault) })
	assert.Contains(t, c.condition(t).Message, failingNote+"; failure action withheld, the fault looks shared: no node of this configuration passed in the last 10m0s")
	assert.Contains(t, c.waitEvent(t, wellknown.SharedFault).Note, "Not replacing the node: the fault looks shared")
	assert.Contains(t, c.waitEvent(t, wellknown.VerificationFailed).Note, "failure action: none, replace-node withheld: no node of this configuration passed")
	assert.Equal(t, 1.0, testutil.ToFloat64(r.metrics.shared.WithLabelValues("command")), "nodeready_shared_fault, which the alert reads")
	assert.Zero(t, deletes(dyn), "replaced for a fault no node of the fleet shows as its own")
	node := c.node(t)
	assert.Equal(t, "command", node.Annotations["node-ready/verified-failing"], "the evidence for the other agents")
	assert.Regexp(t, "^"+a.fleet.fingerprint+`\.\d{10}$`, node.Labels["node-ready/verified-config"])
	assert.NotEmpty(t, node.Annotations["node-ready/verified-failed-at"])

	c.addNode(t, fleetNode("node-b", a.fleet.fingerprint, time.Now(), ""))
	waitFor(t, "replaced once a node of the configuration passed", func() bool { return deletes(dyn) == 1 })
	waitFor(t, "condition Replacing", func() bool { return c.condition(t).Reason == string(wellknown.Replacing) })
	assert.Equal(t, 0.0, testutil.ToFloat64(r.metrics.shared.WithLabelValues("command")))
	c.emittedOnce(t, wellknown.SharedFault)
}

// TestAnotherConfigurationProvesNothing: nodes verified under another configuration (before
// a change of the checks) are no evidence for this one.
func TestAnotherConfigurationProvesNothing(t *testing.T) {
	c, dyn := newCluster(ownedNode(), fleetNode("node-old", "aaaaaaaaaa", time.Now(), "")), nodeClaims()
	a := newAgent(t, Clients{Kube: c.kube(), Dynamic: dyn}, failing, map[string]string{"MAX_RETRIES": "1", "FAILURE_ACTION": config.ReplaceNode})
	a.fleet.every = 0
	start(t, a)

	waitFor(t, "withheld", func() bool { return c.condition(t).Reason == string(wellknown.SharedFault) })
	assert.Zero(t, deletes(dyn))
}

// TestNoFleetReadOnTheSuccessPathNorWithoutAnAction: the evidence is read only when a
// failure action is due: never by a node that passes, nor by one that fails with
// keep-tainted, which writes none either.
func TestNoFleetReadOnTheSuccessPathNorWithoutAnAction(t *testing.T) {
	c := newCluster(heldNode())
	r := runNew(t, c, passing, map[string]string{"FAILURE_ACTION": config.ReplaceNode})
	waitFor(t, "released", func() bool { return isVerified(r.Agent) })
	assert.Zero(t, c.requests("list", ""), "a read of the fleet on the success path")
	assert.Regexp(t, `^[0-9a-f]{10}\.\d{10}$`, c.node(t).Labels["node-ready/verified-config"], "the release's own write names its configuration")
	assert.Equal(t, 1, c.requests("patch", ""), "the release is one write")

	c = newCluster(heldNode())
	r = runNew(t, c, failing, map[string]string{"MAX_RETRIES": "1"})
	waitFor(t, "failure recorded", func() bool { return failures(r.Agent) == 1 })
	waitFor(t, "rounds go on", func() bool { return rounds(r.Agent) >= 4 })
	assert.Zero(t, c.requests("list", ""), "a read of the fleet without a failure action")
	assert.Zero(t, c.requests("patch", ""), "evidence written without a failure action")
}

// TestReleaseClearsTheFailingRecord: a node that failed, then passed, is released in one
// write that also removes what it recorded as failing, so it counts as passed only.
func TestReleaseClearsTheFailingRecord(t *testing.T) {
	c := newCluster(heldNode())
	a := newAgent(t, Clients{Kube: c.kube()}, failing, map[string]string{"MAX_RETRIES": "1", "FAILURE_ACTION": config.FailOpen, "FAIL_OPEN_AFTER": "1h"})
	r := start(t, a)
	waitFor(t, "evidence written", func() bool { return c.node(t).Annotations["node-ready/verified-failing"] == "command" })
	require.NoError(t, r.stop(t))

	r = runNew(t, c, passing, map[string]string{"FAILURE_ACTION": config.FailOpen})
	waitFor(t, "released", func() bool { return isVerified(r.Agent) })
	node := c.node(t)
	assert.NotContains(t, node.Annotations, "node-ready/verified-failing")
	assert.NotContains(t, node.Annotations, "node-ready/verified-failed-at")
	assert.Equal(t, "true", node.Labels["node-ready/verified"])
}

// TestFleetReadsCheapWhileNothingPassed: while no node of the configuration passed, a
// read of the evidence lists the verified nodes only (which return none), never the
// failing ones, and the reads come twice as far apart each time the fault stays shared,
// up to 16 intervals; once a node passes, the next read lists the others too.
func TestFleetReadsCheapWhileNothingPassed(t *testing.T) {
	c := newCluster(ownedNode())
	a := newAgent(t, Clients{Kube: c.kube()}, failing, map[string]string{"MAX_RETRIES": "1", "FAILURE_ACTION": config.ReplaceNode})
	f := a.fleet
	f.every = time.Hour // no read falls due by itself in this test
	for range 3 {
		assert.Contains(t, f.judge(t.Context(), []string{"command"}), "no node of this configuration passed")
		f.next = time.Time{} // the next read due now
	}
	assert.Equal(t, 3, c.requests("list", ""), "one list of the verified nodes a read")
	assert.Equal(t, 4, f.backoff, "the reads twice as far apart each time")
	for range 4 {
		f.judge(t.Context(), []string{"command"})
		f.next = time.Time{}
	}
	assert.Equal(t, maxFleetBackoff, f.backoff)

	c.addNode(t, fleetNode("node-b", f.fingerprint, time.Now(), ""))
	assert.Empty(t, f.judge(t.Context(), []string{"command"}), "a node of the configuration passed")
	assert.Equal(t, 7+2, c.requests("list", ""), "the verified nodes, then the others")
	assert.Equal(t, 1, f.backoff)
}
