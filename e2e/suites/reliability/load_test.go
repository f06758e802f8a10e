package reliability

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeready/nodeready/e2e/framework"
)

// TestLoad: a hundred nodes join at once and their agents verify them against the one local
// API server. Every node ends verified with exactly its foreign taints and labels, never
// half released, and every agent exits 0. The API server's request counts (its /metrics,
// every client) and the agents' own requests (its audit log) are printed per node.
func TestLoad(t *testing.T) {
	const (
		nodes = 100
		// perNodeLimit bounds the agents' API requests per node: a regression guard well
		// above what one verification needs.
		perNodeLimit = 25
	)
	e := setup(t)
	f := e.fleet(t, "load")
	client := e.fw.Client()
	ctx := t.Context()

	before, err := apiServerRequests(ctx, client)
	require.NoError(t, err)
	from := e.audit.offset(t)
	began := time.Now()
	names := f.addNodes(t, "", nodes, framework.NodeOptions{}, nil)
	added := time.Since(began)

	var mu sync.Mutex
	var took []time.Duration
	onEachNode(t, names, func(_ int, n string) error {
		v, err := f.versions.waitFor(ctx, n, 5*time.Minute, "released", nodeVersion.released)
		if err != nil {
			return err
		}
		mu.Lock()
		took = append(took, v.At.Sub(began))
		mu.Unlock()
		return nil
	})
	if t.Failed() {
		return
	}
	allReleased := time.Since(began)
	require.NoError(t, f.WaitReleased(ctx, names...)) // exactly the foreign taints and labels
	for _, n := range names {
		require.NoError(t, f.waitAgentsDone(ctx, n, 1))
	}
	allGone := time.Since(began)
	after, err := apiServerRequests(ctx, client)
	require.NoError(t, err)

	f.assertStates(t, []framework.NodeState{framework.Unverified, framework.Released}, names...)
	versionsSeen := f.assertNeverHalfDone(t, names...)
	exits := f.assertExits(t, names...)
	for _, n := range names {
		assert.Len(t, f.PodsOn(n), 1, "agents on %s", n)
	}
	agent := countRequests(e.audit.since(t, from, names...))
	assert.LessOrEqual(t, agent.total()/nodes, float64(perNodeLimit), "agent API requests per node")

	slices.Sort(took)
	q := func(p float64) time.Duration { return took[int(p*float64(len(took)-1))].Round(100 * time.Millisecond) }
	t.Logf("%d nodes added in %s; released: p50 %s, p90 %s, last %s after the first was added; all agents gone after %s; %d agents exit 0; %d node versions, none half released",
		nodes, added.Round(100*time.Millisecond), q(0.5), q(0.9), allReleased.Round(100*time.Millisecond), allGone.Round(100*time.Millisecond), exits, versionsSeen)
	t.Logf("%s", requestTable("API server requests during the run, every client (apiserver_request_total, after - before):", after.sub(before), nodes))
	t.Logf("%s", requestTable("the agents' own requests (audit log, user "+agentUser+"):", agent, nodes))
}
