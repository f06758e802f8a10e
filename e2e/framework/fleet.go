package framework

import (
	"slices"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeready/nodeready/e2e/framework/harness"
	"github.com/nodeready/nodeready/e2e/framework/kubelet"
)

// Fleet is a test's set of simulated nodes (harness.Fleet) with the waits and assertions
// that fail the test.
type Fleet struct {
	*harness.Fleet
	f *Framework
}

// NewFleet starts a fleet for the test and stops it at the end, removing its nodes. After a
// failing test it reports the fleet's nodes and pods and keeps the agent and kubelet logs.
func (f *Framework) NewFleet(name string) *Fleet {
	f.t.Helper()
	return &Fleet{Fleet: harness.NewFleetForTest(f.t, f.env.cluster, name), f: f}
}

// NewFleetWithNode is NewFleet with one node, <name>-0, added with o; it returns the fleet
// and the node's name.
func (f *Framework) NewFleetWithNode(name string, o NodeOptions) (*Fleet, string) {
	f.t.Helper()
	fl := f.NewFleet(name)
	node := fl.Name() + "-0"
	require.NoError(f.t, fl.AddNode(f.t.Context(), node, o))
	return fl, node
}

// Add adds n nodes with o and returns their names.
func (fl *Fleet) Add(n int, o NodeOptions) []string {
	fl.f.t.Helper()
	nodes, err := fl.AddNodes(fl.f.t.Context(), n, o)
	require.NoError(fl.f.t, err)
	return nodes
}

// Rounds returns the node's agent's nodeready_rounds_total.
func (fl *Fleet) Rounds(node string) float64 {
	t := fl.f.t
	t.Helper()
	pod, err := fl.WaitAgentRunning(t.Context(), node)
	require.NoError(t, err)
	n, err := harness.Scrape(t.Context(), pod.MetricsAddr, "nodeready_rounds_total")
	require.NoError(t, err)
	return n
}

// WaitMoreRounds waits until the node's agent has run n more rounds of checks than now, so
// that whatever the test changed before has been looked at.
func (fl *Fleet) WaitMoreRounds(node string, n float64) {
	t := fl.f.t
	t.Helper()
	pod, err := fl.WaitAgentRunning(t.Context(), node)
	require.NoError(t, err)
	require.NoError(t, fl.WaitMetric(t.Context(), pod, "nodeready_rounds_total", fl.Rounds(node)+n))
}

// AssertVerifiedBy asserts that the node ran exactly pods agent pods, each started once (no
// restarts) and each ending with exit code 0 after the kubelet's SIGTERM, within the grace
// period. It returns the pods, oldest first.
func (fl *Fleet) AssertVerifiedBy(node string, pods int) []kubelet.PodInfo {
	t := fl.f.t
	t.Helper()
	on := fl.PodsOn(node)
	require.Len(t, on, pods, "agent pods on %s", node)
	for _, p := range on {
		assert.Zero(t, p.Restarts, "restarts of %s", p.Name)
		if assert.Len(t, p.Exits, 1, "exits of %s", p.Name) {
			e := p.Exits[0]
			assert.Equal(t, 0, e.Code, "exit code of %s", p.Name)
			assert.True(t, e.Signaled, "%s ended on its own, not on the kubelet's SIGTERM", p.Name)
			assert.False(t, e.Killed, "%s outlived its grace period", p.Name)
		}
	}
	assert.Contains(t, fl.Kubelet().Images(node), harness.AgentImage, "image pulled on %s", node)
	// Oldest first: each pod ended before the next one started.
	slices.SortFunc(on, func(a, b kubelet.PodInfo) int {
		if len(a.Exits) == 0 || len(b.Exits) == 0 {
			return len(b.Exits) - len(a.Exits)
		}
		return a.Exits[0].At.Compare(b.Exits[0].At)
	})
	return on
}

// AssertHistory asserts that the node went through exactly the states want, in order. It
// first waits until the node watch has seen the last of them: after an API server restart
// the watch may lag behind the node.
func (fl *Fleet) AssertHistory(node string, want ...NodeState) {
	t := fl.f.t
	t.Helper()
	require.NoError(t, fl.History().WaitLatest(t.Context(), node, want[len(want)-1]))
	assert.Equal(t, want, fl.History().States(node), "states of %s", node)
}
