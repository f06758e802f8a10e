package reliability

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeready/nodeready/checks/dnstest"
	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/kubelet"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// outageTaintBefore is a foreign taint the admin changes to outageTaintAfter right after
// each API server restart, before the agents' next write: the change must survive.
var (
	outageTaintBefore = corev1.Taint{Key: "example.com/maintenance", Value: "before", Effect: corev1.TaintEffectPreferNoSchedule}
	outageTaintAfter  = corev1.Taint{Key: "example.com/maintenance", Value: "after", Effect: corev1.TaintEffectPreferNoSchedule}
)

// outageNode is one node of an outage and where its agent was when the API server stopped.
type outageNode struct {
	name  string
	phase string // start, checks, or read-write
	dns   *dnstest.Server
	agent kubelet.PodInfo
	// rounds: nodeready_rounds_total when the API server stopped and when it was back.
	roundsBefore, roundsAfter float64
	releasedAfter             time.Duration // from the API server's return to the release
}

// TestAPIServerOutage stops the API server for 10 and for 25 seconds while agents are at
// every stage: one just starting, one in its checks, and six whose checks pass at random
// moments in the last 40 milliseconds before the stop, so that the outage falls before
// their read of the node, between their read and their write, or after the write. The agents wait with bounded backoff, need no
// restart, and release their nodes once the API server is back; a foreign taint the admin
// changes right after the restart, before the agents' next write, survives: no agent writes
// on what it read before the outage.
func TestAPIServerOutage(t *testing.T) {
	// Two outages, not more: after an API server restart the controller manager's informers
	// take up to half a minute to reconnect, and each outage needs new agent pods.
	outages := []time.Duration{10 * time.Second, 25 * time.Second}
	const readWrite = 6 // nodes per outage whose release races the stop
	e := setup(t)
	f := e.fleet(t, "outage")
	client := e.fw.Client()
	cp := e.fw.ControlPlane()
	ctx := t.Context()
	from := e.audit.offset(t)
	rng := rand.New(rand.NewPCG(7, 7))
	opts := framework.NodeOptions{Taints: []corev1.Taint{outageTaintBefore}}

	var all []*outageNode
	type stopAt struct {
		stopped, back time.Time
		nodes         []*outageNode
	}
	var stops []stopAt
	for k, down := range outages {
		add := func(phase string, held bool, delay time.Duration) *outageNode {
			n := &outageNode{name: fmt.Sprintf("%s-%d-%s%d", f.Name(), k, phase, len(all)), phase: phase, dns: newSlowDNS(t, delay)}
			if held {
				n.dns.Hold()
			}
			require.NoError(t, f.addSlowNode(ctx, n.name, n.dns, opts))
			all = append(all, n)
			return n
		}
		checks := add("checks", true, 0)
		var rw []*outageNode
		for range readWrite {
			rw = append(rw, add("rw", true, 0))
		}
		// The held nodes' agents are in their checks, waiting for DNS.
		for _, n := range append([]*outageNode{checks}, rw...) {
			require.NoError(t, waitQuery(ctx, n.dns, 0))
			var err error
			n.agent, err = f.waitRunning(ctx, n.name, nil)
			require.NoError(t, err)
		}
		// Its DNS answers after 300 ms, so its first round cannot end before the stop.
		starting := add("start", false, 300*time.Millisecond)
		var err error
		starting.agent, err = f.waitRunning(ctx, starting.name, nil)
		require.NoError(t, err)

		// The starting agent's process runs: now. The read-write nodes' answers go out 10 to
		// 50 ms after this moment, and the stop at 50 ms: an agent needs some tens of
		// milliseconds from the answer to its read of the node, and a few more to its write.
		var opened sync.WaitGroup
		for _, n := range rw {
			d := 10*time.Millisecond + time.Duration(rng.Int64N(int64(40*time.Millisecond)))
			opened.Go(func() {
				pause(ctx, d)
				n.dns.Open()
			})
		}
		pause(ctx, 50*time.Millisecond)
		stopped := time.Now()
		require.NoError(t, cp.StopAPIServer())
		opened.Wait()
		nodes := append([]*outageNode{checks, starting}, rw...)
		for _, n := range nodes {
			n.roundsBefore = agentRounds(ctx, f, n.agent)
		}
		// Halfway through the outage the checking agent's DNS answers: its checks pass
		// while the API server is away.
		pause(ctx, down/2)
		checks.dns.Open()
		pause(ctx, down-time.Since(stopped))

		startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		require.NoError(t, cp.StartAPIServer(startCtx), "restart the API server")
		cancel()
		back := time.Now()
		// At once, before the agents' next write: another owner changes its taint.
		for _, n := range nodes {
			require.NoError(t, replaceTaint(ctx, client, n.name, outageTaintBefore, outageTaintAfter))
		}
		for _, n := range nodes {
			n.roundsAfter = agentRounds(ctx, f, n.agent)
		}
		stops = append(stops, stopAt{stopped: stopped, back: back, nodes: nodes})
		t.Logf("outage %d: API server stopped %s, ready again after %s", k+1, stopped.Format("15:04:05.000"), back.Sub(stopped).Round(100*time.Millisecond))

		for _, n := range nodes {
			v, err := f.versions.waitFor(ctx, n.name, framework.WaitTimeout, "released", nodeVersion.released)
			require.NoError(t, err)
			n.releasedAfter = v.At.Sub(back)
		}
	}

	names := make([]string, 0, len(all))
	for _, n := range all {
		names = append(names, n.name)
	}
	for _, n := range all {
		require.NoError(t, f.waitAgentsDone(ctx, n.name, 1))
		pods := f.PodsOn(n.name)
		require.Len(t, pods, 1, "agent pods on %s", n.name)
		assert.Equal(t, n.agent.UID, pods[0].UID, "%s released by the agent that rode out the outage", n.name)

		node, err := client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		require.NoError(t, err)
		final := nodeVersion{Taints: node.Spec.Taints, Labels: node.Labels}
		assert.True(t, final.released(), "node %s at the end: %s", n.name, final)
		assert.True(t, hasExactTaint(node.Spec.Taints, outageTaintAfter), "node %s lost the taint changed after the restart: %v", n.name, taintsOf(node.Spec.Taints))
		assert.False(t, hasExactTaint(node.Spec.Taints, outageTaintBefore), "node %s: a write brought back the taint as it was before the restart: %v", n.name, taintsOf(node.Spec.Taints))
		for _, ft := range framework.ForeignTaints {
			assert.True(t, hasExactTaint(node.Spec.Taints, ft), "node %s lost %s", n.name, ft.ToString())
		}
		// What people see agrees with the node: the agent's condition says Verified, also
		// where the release landed just before a stop and the condition write that follows
		// it fell into the outage (the agent writes it again once the API server is back).
		if verdict := framework.AgentCondition(node); assert.NotNil(t, verdict, "node %s released without the condition %s", n.name, wellknown.ConditionType) {
			assert.Equal(t, corev1.ConditionTrue, verdict.Status, "node %s released, condition %s: %s", n.name, verdict.Reason, verdict.Message)
		}
	}
	f.assertStates(t, []framework.NodeState{framework.Unverified, framework.Released}, names...)
	versionsSeen := f.assertNeverHalfDone(t, names...)
	exits := f.assertExits(t, names...)

	// Rounds during an outage: the backoff grows to RETRY_BACKOFF_MAX (1s here) and stays.
	const maxBackoff = time.Second
	events := e.audit.since(t, from, names...)
	phases := map[string]int{}
	var stale, patchesAfter int
	var slowest time.Duration
	for _, s := range stops {
		down := s.back.Sub(s.stopped)
		bound := 5 + down.Seconds()/(0.9*maxBackoff.Seconds()) + 2
		for _, n := range s.nodes {
			rounds := n.roundsAfter - n.roundsBefore
			assert.LessOrEqual(t, rounds, bound, "node %s: %v rounds in an outage of %s", n.name, rounds, down)
			slowest = max(slowest, n.releasedAfter)
			if n.phase == "rw" {
				phases[rwPhase(events, n.name, s.stopped)]++
			} else {
				phases[n.phase]++
			}
		}
		for _, ev := range events {
			if ev.key() == (requestKey{"PATCH", "nodes"}) && ev.RequestReceived.After(s.back) && slices.ContainsFunc(s.nodes, func(n *outageNode) bool { return n.name == ev.node() }) {
				patchesAfter++
				if ev.code() == 422 {
					stale++
				}
			}
		}
	}
	var caught []string
	for _, p := range slices.Sorted(maps.Keys(phases)) {
		caught = append(caught, fmt.Sprintf("%s %d", p, phases[p]))
	}
	t.Logf("%d outages (%v), %d agents caught: %s", len(outages), outages, len(all), strings.Join(caught, ", "))
	t.Logf("every agent released its node after the API server was back, the slowest %s later, with no restart; %d release patches after the restarts, %d refused as stale (422) and redone; the taint changed after each restart survived on every node; %d agents exit 0; %d node versions, none half released",
		slowest.Round(100*time.Millisecond), patchesAfter, stale, exits, versionsSeen)
}

// agentRounds scrapes the agent's nodeready_rounds_total; -1 when it cannot.
func agentRounds(ctx context.Context, f *fleet, pod kubelet.PodInfo) float64 {
	p, ok := f.Kubelet().Pod(pod.UID)
	if !ok || !p.Running {
		return -1
	}
	s, err := scrapeAgent(ctx, p.MetricsAddr)
	if err != nil {
		return -1
	}
	return s["nodeready_rounds_total"]
}

// rwPhase says, from the audit log, where the node's agent was when the API server stopped:
// it had written already, had read the node but not written, or had not read it yet.
func rwPhase(events []auditEvent, node string, stopped time.Time) string {
	var read, wrote bool
	for _, ev := range events {
		if ev.node() != node || ev.StageTimestamp.After(stopped) || ev.code() >= 300 {
			continue
		}
		switch ev.key() {
		case requestKey{"GET", "nodes"}:
			read = true
		case requestKey{"PATCH", "nodes"}:
			wrote = true
		}
	}
	switch {
	case wrote:
		return "wrote before the stop"
	case read:
		return "read, stop before the write"
	default:
		return "stop before the read"
	}
}

// replaceTaint replaces the taint old with new in one JSON Patch locked by a test of the
// whole taint list, retried on a lost lock.
func replaceTaint(ctx context.Context, client kubernetes.Interface, node string, old, new corev1.Taint) error {
	return retryLocked(ctx, func() error {
		n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		taints := slices.Clone(n.Spec.Taints)
		i := slices.IndexFunc(taints, func(t corev1.Taint) bool { return t.Key == old.Key && t.Effect == old.Effect && t.Value == old.Value })
		if i < 0 {
			return fmt.Errorf("node %s has no taint %s: %v", node, old.ToString(), taintsOf(taints))
		}
		taints[i] = new
		patch := jsonPatch{
			{"op": "test", "path": "/spec/taints", "value": n.Spec.Taints},
			{"op": "replace", "path": "/spec/taints", "value": taints},
		}
		_, err = client.CoreV1().Nodes().Patch(ctx, node, types.JSONPatchType, patch.bytes(), metav1.PatchOptions{FieldManager: "e2e-admin"})
		return err
	})
}

func hasExactTaint(taints []corev1.Taint, want corev1.Taint) bool {
	return slices.ContainsFunc(taints, func(t corev1.Taint) bool {
		return t.Key == want.Key && t.Effect == want.Effect && t.Value == want.Value
	})
}
