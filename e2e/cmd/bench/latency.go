package main

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nodeready/nodeready/checks/dnstest"
	"github.com/nodeready/nodeready/e2e/framework/harness"
)

// Goals of the latency benchmark, in round trips of roundTrip: the checks, then one PATCH.
const (
	roundTrip          = 200 * time.Millisecond
	latencyGoal        = 2*roundTrip + 50*time.Millisecond
	releaseRequestGoal = 4
)

// checkRequests are the requests of the default checks themselves (apiserver, endpoints);
// every other request of an agent is the release's and its reports'.
var checkRequests = []string{"GET /readyz", "LIST endpointslices"}

// benchLatency runs the agent binary once per run against its own fresh node, one at a
// time, on a network where every round trip takes roundTrip: a DNS server that answers
// that late, and a proxy in front of the API server that holds every request that long
// (the agent's kubeconfig and KUBERNETES_SERVICE_HOST name the proxy). It reports the time
// from exec to the verified label, in milliseconds and in round trips, and the requests
// each verification sent, which the proxy counts. The first run is not counted.
func benchLatency(ctx context.Context, c *harness.Cluster, env agentEnv, bin string, runs int) *section {
	s := &section{Title: fmt.Sprintf("latency: %s per round trip", ms(roundTrip))}
	client := c.Client()
	const run = "latency"
	work, err := os.MkdirTemp("", "nodeready-latency-")
	if err != nil {
		s.Err = err
		return s
	}
	defer os.RemoveAll(work)
	cp := c.ControlPlane()
	proxy, err := startSlowProxy(cp.APIServerURL(), cp.CAFile(), work, roundTrip)
	if err != nil {
		s.Err = err
		return s
	}
	defer proxy.Close()
	dns, err := dnstest.NewServer(map[string][]netip.Addr{harness.DNSName: {dnsAnswer}})
	if err != nil {
		s.Err = err
		return s
	}
	defer dns.Close()
	dns.SetDelay(roundTrip)
	env.dns = dns.Addr()
	env.serviceHost, env.servicePort = proxy.Host, proxy.Port
	env.apiURL, env.caFile = proxy.URL, proxy.caFile

	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	nw, err := watchNodes(watchCtx, client, benchLabel+"="+run, nil)
	if err != nil {
		s.Err = err
		return s
	}
	var (
		ext    durations
		own    phases
		perRun []map[string]int
		nodes  []string
	)
	for i := range runs + 1 {
		if ctx.Err() != nil {
			break
		}
		before := proxy.requests.snapshot()
		r := startRun(ctx, client, c, env, nw, bin, work, fmt.Sprintf("latency-%d", i), run)
		if r.err != nil && r.started.IsZero() {
			s.Err = r.err
			break
		}
		finishRun(r) // one agent at a time: the proxy's counts in between are this agent's
		if i == 0 {
			continue
		}
		if r.err != nil {
			s.Failures++
			s.note("%s: %v", r.node, r.err)
			continue
		}
		nodes = append(nodes, r.node)
		d := r.labelled.Sub(r.started)
		ext = append(ext, d)
		own.add(r.agent)
		perRun = append(perRun, diffCounts(proxy.requests.snapshot(), before))
	}
	events, eventsErr := verifiedEvents(ctx, client, nodes)
	cleanup(client, run)

	s.add("runs (one agent process at a time, fresh node each; first run not counted)", fmt.Sprintf("%d counted, %d failed", len(ext), s.Failures))
	s.goal("exec to label seen on a node watch", ext.summary(false),
		"p50 <= "+ms(latencyGoal), len(ext) > 0 && ext.pct(50) <= latencyGoal)
	if len(ext) > 0 {
		s.add("the same in round trips of "+ms(roundTrip), fmt.Sprintf("p50 %.2f, max %.2f",
			float64(ext.pct(50))/float64(roundTrip), float64(ext.max())/float64(roundTrip)))
	}
	own.rows(s, "agent: ")
	if len(perRun) > 0 {
		totals, beyond := make([]int, 0, len(perRun)), make([]int, 0, len(perRun))
		for _, m := range perRun {
			totals = append(totals, sum(m))
			beyond = append(beyond, sum(m)-sumOf(m, checkRequests))
		}
		fewest := slices.Index(totals, slices.Min(totals))
		s.add("API requests per verification (through the proxy; min / max)", fmt.Sprintf("%d / %d", slices.Min(totals), slices.Max(totals)))
		s.goal("of which beyond the checks' own (GET /readyz, LIST endpointslices; max)", fmt.Sprint(slices.Max(beyond)),
			fmt.Sprintf("<= %d", releaseRequestGoal), slices.Max(beyond) <= releaseRequestGoal)
		s.add("requests of the verification with the fewest", breakdown(perRun[fewest]))
	}
	if eventsErr == nil {
		s.verifiedEventsGoal(events, len(nodes))
	}
	s.note("Each run registers a fresh node and starts `%s` as the overhead runs do, with the installed configuration "+
		"(`CHECKS=%s`, `SETTLE_TIME=%s`), on a network where every round trip takes %s: the DNS server answers that late, "+
		"and the agent reaches the API server (kubeconfig and `KUBERNETES_SERVICE_HOST`) through a TLS-terminating proxy "+
		"that holds every request that long before it passes it on; watches stream through it as they come. The benchmark's "+
		"own node watch goes to the API server directly. The checks run at once, so they take one round trip (dns, "+
		"apiserver's GET /readyz and endpoints' LIST each take one); the least a release can add is one more, its PATCH. "+
		"The requests are counted at the proxy from the agent's start to its exit, after the SIGTERM and the settle window.",
		bin[strings.LastIndex(bin, "/")+1:], env.config["CHECKS"], env.config["SETTLE_TIME"], ms(roundTrip))
	return s
}

// diffCounts returns after minus before, without the keys that did not change.
func diffCounts(after, before map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

func sum(m map[string]int) int {
	t := 0
	for v := range maps.Values(m) {
		t += v
	}
	return t
}

func sumOf(m map[string]int, keys []string) int {
	t := 0
	for _, k := range keys {
		t += m[k]
	}
	return t
}
