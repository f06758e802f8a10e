package reliability

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/prometheus"
	"github.com/nodeready/nodeready/e2e/framework/rules"
)

// scrapeInterval is the PodMonitor's (manifests/monitoring/podmonitor.yaml).
const scrapeInterval = 15 * time.Second

// settled is how long the held count may take to follow a change: a new agent is found by
// service discovery (its refresh, then the discovery manager's 5 s) and scraped within one
// interval; a released one is scraped once more within METRICS_FINAL_SCRAPE_TIMEOUT (24 s),
// and a gone one's series end within one interval and discovery. With room for a loaded
// machine.
const settled = 45 * time.Second

// TestHoldTimeSeries: a real Prometheus scrapes a fleet's agents every 15 s, as the PodMonitor
// does, and the dashboard's queries, evaluated on what it scraped, tell every node's hold time
// and the count of held nodes as the nodes' own history has them. Most agents live a few
// seconds, well inside one scrape interval: METRICS_FINAL_SCRAPE_TIMEOUT keeps each one,
// released, until a scrape has read its final numbers. The test then counts, without that
// wait, how many of a second wave's hold times Prometheus still gets.
func TestHoldTimeSeries(t *testing.T) {
	e := setup(t)
	f := e.newFleet(t, "hold")
	ctx := t.Context()
	queries, err := rules.DashboardQueries(filepath.Join(e.fw.RepoRoot(), "charts", "nodeready", "dashboards", "nodeready.json"))
	require.NoError(t, err)
	prom := prometheus.Start(t, prometheus.Options{
		Job: "kube-system/nodeready", Interval: scrapeInterval, SDRefresh: time.Second,
		Targets: func() []prometheus.Target {
			var out []prometheus.Target
			for _, p := range f.Kubelet().Pods() {
				if p.Running && p.MetricsAddr != "" {
					// The labels the PodMonitor gives a target (node from its relabeling).
					out = append(out, prometheus.Target{Addr: p.MetricsAddr, Labels: map[string]string{
						"namespace": p.Namespace, "pod": p.Name, "node": p.Node}})
				}
			}
			return out
		},
	})

	start := time.Now()
	waiting := framework.NodeOptions{Env: map[string]string{"METRICS_FINAL_SCRAPE_TIMEOUT": "24s"}}
	quick := f.Add(6, waiting)
	broken := waiting
	broken.BrokenDNS = true
	held := f.Add(3, broken)
	nodes := append(slices.Clone(quick), held...)

	// The held nodes stay held through several scrapes before their DNS heals.
	require.NoError(t, f.WaitReleased(ctx, quick...))
	require.NoError(t, pollUntil(ctx, 3*time.Minute, func(ctx context.Context) (bool, error) {
		for _, n := range held {
			s, err := prom.Query(ctx, fmt.Sprintf(`count_over_time(nodeready_verified{node=%q}[10m])`, n), time.Now())
			if err != nil || len(s) != 1 || s[0].Value < 5 {
				return false, err
			}
		}
		return true, nil
	}), "the held nodes' agents scraped five times each")
	for _, n := range held {
		f.DNS(n).SetBroken(false)
	}
	require.NoError(t, f.WaitReleased(ctx, held...))
	require.NoError(t, f.WaitAgentsGone(ctx, nodes...))
	end := targetsGone(t, prom)

	truth := holdHistory(t, e, f, nodes)
	window := fmt.Sprintf("%ds", int(end.Sub(start).Seconds())+60)
	query := func(panel string) []prometheus.Sample {
		t.Helper()
		q, ok := queries[panel]
		require.True(t, ok, "the dashboard has no query %s", panel)
		s, err := prom.Query(ctx, strings.ReplaceAll(q, "$__range", window), end)
		require.NoError(t, err, panel)
		return s
	}

	t.Run("the hold time of every node", func(t *testing.T) {
		got := map[string]float64{}
		for _, s := range query("Hold time per released node/A") {
			got[s.Labels["node"]] = s.Value
		}
		var table strings.Builder
		fmt.Fprintf(&table, "%-14s %10s %10s %12s\n", "NODE", "HELD (s)", "SERIES (s)", "AGENT STAYED")
		for _, n := range nodes {
			fmt.Fprintf(&table, "%-14s %10.3f %10.3f %12s\n", n, truth[n].duration().Seconds(), got[n], stayed(f, n, truth[n].released))
			if assert.Contains(t, got, n, "no hold time of %s in Prometheus", n) {
				// creationTimestamp has whole seconds on both sides; the agent's clock stops
				// at the PATCH's answer, the watch's when it shows the node released.
				assert.InDelta(t, truth[n].duration().Seconds(), got[n], 1, "hold time of %s", n)
			}
		}
		assert.Len(t, got, len(nodes), "nodes with a hold time")
		t.Logf("hold times, from the nodes' history and from the series scraped every %s:\n%s", scrapeInterval, table.String())

		holds := make([]float64, 0, len(nodes))
		for _, n := range nodes {
			holds = append(holds, truth[n].duration().Seconds())
		}
		sort.Float64s(holds)
		for panel, want := range map[string]float64{
			"Hold time, median/A":          quantile(0.5, holds),
			"Hold time, 90th percentile/A": quantile(0.9, holds),
			"Longest hold/A":               holds[len(holds)-1],
			"Nodes released/A":             float64(len(nodes)),
			"Agents holding their node/A":  0,
			"Held nodes over time/B":       0,
		} {
			s := query(panel)
			if assert.Len(t, s, 1, panel) {
				assert.InDelta(t, want, s[0].Value, 1, panel)
			}
		}
	})

	t.Run("the count of held nodes", func(t *testing.T) {
		q := strings.ReplaceAll(queries["Agents holding their node/A"], "$__range", window)
		series, err := prom.QueryRange(ctx, q, start.Add(-time.Minute), end, 5*time.Second)
		require.NoError(t, err)
		require.Len(t, series, 1)
		compared, plateau := 0, 0
		var wrong []string
		for _, p := range series[0].Points {
			// Compared where the truth held still long enough for the series to follow.
			if !truth.stableOver(p.At.Add(-settled), p.At) {
				continue
			}
			compared++
			want := truth.heldAt(p.At)
			if want == len(held) {
				plateau++
			}
			if p.Value != float64(want) {
				wrong = append(wrong, fmt.Sprintf("%s: %v held, the series says %v", p.At.Format(time.TimeOnly), want, p.Value))
			}
		}
		t.Logf("held count compared at %d of %d steps, %d of them with the %d held nodes", compared, len(series[0].Points), plateau, len(held))
		assert.Empty(t, wrong)
		assert.Positive(t, plateau, "no step with the held nodes to compare")
	})

	// Without the wait, how many hold times does Prometheus get? Evidence for the wait, not an
	// assertion: how many agents a scrape catches depends on the scrape's phase.
	t.Run("without METRICS_FINAL_SCRAPE_TIMEOUT", func(t *testing.T) {
		plain := f.Add(6, framework.NodeOptions{})
		require.NoError(t, f.WaitReleased(ctx, plain...))
		require.NoError(t, f.WaitAgentsGone(ctx, plain...))
		at := targetsGone(t, prom)
		s, err := prom.Query(ctx, fmt.Sprintf(`max by (node) (max_over_time(nodeready_hold_seconds{node=~%q}[5m]))`, strings.Join(plain, "|")), at)
		require.NoError(t, err)
		t.Logf("without the wait, Prometheus has the hold time of %d of %d nodes (with it, %d of %d)", len(s), len(plain), len(nodes), len(nodes))
	})
}

// nodeHold is a node's hold as its history shows it: created, then released.
type nodeHold struct {
	created, released time.Time
	// changes are the times the node's startup taint came or went, in order.
	changes []taintChange
}

type taintChange struct {
	at      time.Time
	tainted bool
}

func (h nodeHold) duration() time.Duration { return h.released.Sub(h.created) }

// holds are the fleet's nodes' holds.
type holds map[string]nodeHold

// holdHistory reads each node's hold from the API (its creation) and the fleet's watch.
func holdHistory(t *testing.T, e env, f *framework.Fleet, nodes []string) holds {
	t.Helper()
	out := holds{}
	for _, n := range nodes {
		node, err := e.fw.Client().CoreV1().Nodes().Get(t.Context(), n, metav1.GetOptions{})
		require.NoError(t, err)
		h := nodeHold{created: node.CreationTimestamp.Time}
		tainted := false
		for _, entry := range f.History().Entries(n) {
			s := entry.State.State()
			now := s.Tainted && !entry.Deleted
			if now != tainted || len(h.changes) == 0 {
				h.changes = append(h.changes, taintChange{at: entry.At, tainted: now})
			}
			tainted = now
			if s == framework.Released && h.released.IsZero() {
				h.released = entry.At
			}
		}
		require.False(t, h.released.IsZero(), "%s never released", n)
		out[n] = h
	}
	return out
}

// heldAt counts the nodes carrying the startup taint at t.
func (hs holds) heldAt(t time.Time) int {
	n := 0
	for _, h := range hs {
		tainted := false
		for _, c := range h.changes {
			if c.at.After(t) {
				break
			}
			tainted = c.tainted
		}
		if tainted {
			n++
		}
	}
	return n
}

// stableOver reports whether no node's taint came or went in (from, to].
func (hs holds) stableOver(from, to time.Time) bool {
	for _, h := range hs {
		for _, c := range h.changes {
			if c.at.After(from) && !c.at.After(to) {
				return false
			}
		}
	}
	return true
}

// stayed is how long the node's agent ran on after the release.
func stayed(f *framework.Fleet, node string, released time.Time) string {
	for _, p := range f.PodsOn(node) {
		for _, e := range p.Exits {
			if e.At.After(released) {
				return e.At.Sub(released).Round(100 * time.Millisecond).String()
			}
		}
	}
	return "?"
}

// quantile is PromQL's quantile of sorted values.
func quantile(q float64, sorted []float64) float64 {
	rank := q * float64(len(sorted)-1)
	lo := int(rank)
	if lo+1 >= len(sorted) {
		return sorted[lo]
	}
	return sorted[lo] + (rank-float64(lo))*(sorted[lo+1]-sorted[lo])
}

// targetsGone waits until Prometheus has dropped every target (its agent gone), so that
// every series has its last sample or its end, and returns that time.
func targetsGone(t *testing.T, prom *prometheus.Prometheus) time.Time {
	t.Helper()
	require.NoError(t, pollUntil(t.Context(), 2*time.Minute, func(ctx context.Context) (bool, error) {
		s, err := prom.Query(ctx, "up", time.Now())
		return len(s) == 0, err
	}), "prometheus still has targets")
	return time.Now()
}

// pollUntil polls cond every second for up to timeout.
func pollUntil(ctx context.Context, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	return wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, cond)
}
