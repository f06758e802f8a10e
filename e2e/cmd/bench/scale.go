package main

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodeready/nodeready/agent"
	"github.com/nodeready/nodeready/e2e/framework/harness"
	"github.com/nodeready/nodeready/internal/config"
	"github.com/nodeready/nodeready/internal/wiring"
)

// Goals of the scale benchmark: 5000 nodes, the scalability limit of one cluster, released
// within a minute of one burst.
const scaleGoal = 60 * time.Second

// defaultSizes are the scale runs' node counts unless -nodes says otherwise.
var defaultSizes = sizeList{1000, 5000}

// sizeList is the -nodes flag: node counts, comma-separated.
type sizeList []int

func (l *sizeList) String() string {
	parts := make([]string, 0, len(*l))
	for _, n := range *l {
		parts = append(parts, strconv.Itoa(n))
	}
	return strings.Join(parts, ",")
}

func (l *sizeList) Set(v string) error {
	var out sizeList
	for part := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 1 {
			return fmt.Errorf("%q is not a node count", part)
		}
		out = append(out, n)
	}
	*l = out
	return nil
}

// scaleTimeout bounds the wait for every node of a scale run; a node not verified by then
// counts as a failure.
const scaleTimeout = 5 * time.Minute

// inProcessAgent is one agent of a scale run and what it reported.
type inProcessAgent struct {
	node         string
	created      time.Time // node creation requested
	agentStarted time.Time // agent.New called: the agent's process start
	log          lockedBuffer
	err          error
	cancel       context.CancelFunc
	done         chan struct{} // closed when the agent has returned
	requests     *requestCounter
}

// lockedBuffer is an agent's log.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.buf.Bytes())
}

// gauge counts what runs at once and keeps the peak.
type gauge struct{ cur, peak atomic.Int64 }

func (g *gauge) inc() {
	n := g.cur.Add(1)
	for p := g.peak.Load(); n > p && !g.peak.CompareAndSwap(p, n); p = g.peak.Load() {
	}
}

func (g *gauge) dec() { g.cur.Add(-1) }

// sampleRSS reads this process's VmRSS every interval until ctx ends, and returns the
// largest through the function it returns, which waits for the sampler to stop.
func sampleRSS(ctx context.Context, interval time.Duration) func() int64 {
	var peak int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			if st, err := procStatus(os.Getpid()); err == nil {
				peak = max(peak, st["VmRSS"])
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 { <-done; return peak }
}

// The API server's default flow schema for ServiceAccounts of kube-system, nodeready's
// among them, and its priority level.
const (
	agentFlowSchema    = "kube-system-service-accounts"
	agentPriorityLevel = "workload-high"
)

// scaleProfileTime is how long the API server's CPU profile of a scale run samples.
const scaleProfileTime = 30 * time.Second

// profileAPIServer starts a CPU profile of the API server (its /debug/pprof/profile) and
// returns a function that waits for it and writes it to path. Without a path it does nothing.
func profileAPIServer(ctx context.Context, admin kubernetes.Interface, path string) func() error {
	if path == "" {
		return func() error { return nil }
	}
	done := make(chan error, 1)
	go func() {
		body, err := admin.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", strconv.Itoa(int(scaleProfileTime.Seconds()))).Timeout(scaleProfileTime + time.Minute).DoRaw(ctx)
		if err == nil {
			err = os.WriteFile(path, body, 0o644)
		}
		done <- err
	}()
	return func() error { return <-done }
}

// benchScale registers nodes at once, each with its agent pod and a token bound to it, and
// verifies each with an agent running in this process (agent.New and Run, as main does,
// with the installed configuration, a client of its own and its own connection). When an
// agent's node is seen verified its context ends, as the SIGTERM of the pod's deletion
// does; it finishes its release and settle window and returns.
//
// With a profile path, the API server's CPU profile of the burst's first scaleProfileTime is
// written there (go tool pprof reads it), to show where its time goes.
func benchScale(ctx context.Context, c *harness.Cluster, base config.Config, nodes int, settle time.Duration, run, profile string) (*section, *scaleResult) {
	title := fmt.Sprintf("scale %d, SETTLE_TIME=%s", nodes, settle)
	s := &section{Title: title}
	res := &scaleResult{settle: settle, nodes: nodes}
	admin := c.Client()
	cp := c.ControlPlane()

	// The benchmark's own writes (nodes, pods, tokens) go out unthrottled, "at once".
	fastCfg := cp.RESTConfig()
	fastCfg.QPS, fastCfg.Burst = -1, 0
	fast, err := kubernetes.NewForConfig(fastCfg)
	if err != nil {
		s.Err = err
		return s, nil
	}

	agents := make(map[string]*inProcessAgent, nodes)
	names := make([]string, 0, nodes)
	for i := range nodes {
		name := fmt.Sprintf("%s-%d", run, i)
		names = append(names, name)
		agents[name] = &inProcessAgent{node: name, done: make(chan struct{}), requests: newRequestCounter()}
	}
	var cancelMu sync.Mutex
	onLabelled := func(node string, _ time.Time) {
		cancelMu.Lock()
		defer cancelMu.Unlock()
		if a := agents[node]; a != nil && a.cancel != nil {
			a.cancel()
		}
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	nw, err := watchNodes(watchCtx, admin, benchLabel+"="+run, onLabelled)
	if err != nil {
		s.Err = err
		return s, nil
	}

	before, err := scrapeAPIServer(ctx, admin)
	if err != nil {
		s.Err = err
		return s, nil
	}
	cpuBefore, selfBefore := childCPU(), selfCPU()
	rssCtx, stopRSS := context.WithCancel(ctx)
	defer stopRSS()
	benchRSS := sampleRSS(rssCtx, 250*time.Millisecond)
	var running gauge
	profileDone := profileAPIServer(ctx, admin, profile)

	start := time.Now()
	var wg sync.WaitGroup
	for _, name := range names {
		a := agents[name]
		agentCtx, cancel := context.WithCancel(ctx)
		cancelMu.Lock()
		a.cancel = cancel
		cancelMu.Unlock()
		wg.Go(func() {
			defer close(a.done)
			defer cancel()
			a.err = runInProcess(agentCtx, ctx, fast, cp.APIServerURL(), cp.CAFile(), base, settle, a, run, &running)
		})
	}

	// Every node verified (or its agent gone without), or the time is up.
	deadline, cancelWait := context.WithTimeout(ctx, scaleTimeout)
	for _, name := range names {
		waitCtx, stop := context.WithCancel(deadline)
		go func() {
			select {
			case <-agents[name].done:
				stop()
			case <-waitCtx.Done():
			}
		}()
		_, _ = nw.wait(waitCtx, name)
		stop()
		if deadline.Err() != nil {
			break
		}
	}
	cancelWait()
	allVerified := time.Since(start) // replaced by the last label's time when every node was seen verified
	for _, a := range agents {
		a.cancel() // the rest, on a timeout
	}
	wg.Wait()
	agentsDone := time.Since(start)

	// Watches are counted when they end: give the API server a moment to record the last.
	time.Sleep(time.Second)
	after, err := scrapeAPIServer(ctx, admin)
	if err != nil {
		s.Err = err
		return s, nil
	}
	cpuAfter, selfAfter := childCPU(), selfCPU()
	stopRSS()
	peakRSS := benchRSS()
	if err := profileDone(); err != nil {
		s.note("No CPU profile of the API server: %v", err)
	}
	// No cleanup: the control plane is the run's own and stops with it.

	var (
		toVerified, fromAgent durations
		own                   phases
		errs, unreported      []string
		notReported           int
		reported              = map[string]bool{} // released, and the agent said so
	)
	for _, name := range names {
		a := agents[name]
		_, labelled, released := nw.times(name)
		if !released {
			s.Failures++
			err := a.err
			if err == nil {
				err = fmt.Errorf("never seen verified; last lines of its log:\n%s", lastLines(a.log.Bytes(), 3))
			}
			if len(errs) < 5 {
				errs = append(errs, fmt.Sprintf("%s: %v", name, err))
			}
			continue
		}
		toVerified = append(toVerified, labelled.Sub(a.created))
		fromAgent = append(fromAgent, labelled.Sub(a.agentStarted))
		v, err := parseVerified(a.log.Bytes())
		if err == nil && a.err == nil {
			own.add(v)
			reported[name] = true
			continue
		}
		// Released, but the agent did not report it.
		notReported++
		if len(unreported) < 3 {
			unreported = append(unreported, fmt.Sprintf("%s (run error: %v), last lines of its log:\n\n```\n%s\n```", name, a.err, lastLines(a.log.Bytes(), 3)))
		}
	}
	verified := nodes - s.Failures
	var lastLabel time.Duration
	for _, name := range names {
		if _, at, ok := nw.times(name); ok {
			lastLabel = max(lastLabel, at.Sub(start))
		}
	}
	if s.Failures == 0 {
		allVerified = lastLabel
	}
	var lastStart time.Duration
	for _, a := range agents {
		if !a.agentStarted.IsZero() {
			lastStart = max(lastStart, a.agentStarted.Sub(start))
		}
	}

	s.goal("nodes released (label seen, taint gone) / not released", fmt.Sprintf("%d / %d", verified, s.Failures), "0 not released", s.Failures == 0)
	s.goal("agents that released their node but did not report it (no \"Verified node\")", fmt.Sprint(notReported), "0", notReported == 0)
	if s.Failures == 0 {
		s.goal("time until all verified (first create to last label seen)", secs(allVerified), "< "+secs(scaleGoal), allVerified < scaleGoal)
	} else {
		s.goal("time until all verified (first create to last label seen)", "not all: "+secs(allVerified)+" waited", "< "+secs(scaleGoal), false)
	}
	s.add("time until every agent returned (incl. settle window)", secs(agentsDone))
	s.goal("per node: node created to verified", toVerified.summary(true), "every node < "+secs(scaleGoal),
		len(toVerified) > 0 && toVerified.max() < scaleGoal)
	s.add("per node: agent start to verified", fromAgent.summary(true))
	s.add("burst: last node, pod and token created (last agent started)", secs(lastStart))
	s.add("agents running at once (peak)", fmt.Sprint(running.peak.Load()))
	own.rows(s, "agent: ")

	// All agents' requests; and the fewest one agent needed to release its node and report
	// it (the success path: first round passed, nothing retried), with how many agents
	// needed exactly that many.
	all := map[string]int{}
	var fewest map[string]int
	fewestTotal, atFewest := 0, 0
	for _, name := range names {
		counts := agents[name].requests.snapshot()
		n := 0
		for k, v := range counts {
			all[k] += v
			n += v
		}
		if !reported[name] {
			continue
		}
		switch {
		case fewest == nil || n < fewestTotal:
			fewest, fewestTotal, atFewest = counts, n, 1
		case n == fewestTotal:
			atFewest++
		}
	}
	agentReqs := toFloat(all)
	perNode := total(agentReqs) / float64(max(verified, 1))
	nodeReqs := 0.0
	for k, v := range agentReqs {
		if strings.Contains(k, " nodes") {
			nodeReqs += v
		}
	}
	s.add("agent API requests on the success path (fewest of one agent)", fmt.Sprintf("%d: %s (%d of %d agents)", fewestTotal, breakdown(fewest), atFewest, len(reported)))
	beyond := fewestTotal - sumOf(fewest, checkRequests)
	s.goal("of which beyond the checks' own (GET /readyz, LIST endpointslices)", fmt.Sprint(beyond),
		fmt.Sprintf("<= %d", releaseRequestGoal), beyond <= releaseRequestGoal)
	s.add("of which the release itself (GET nodes, PATCH nodes)", fmt.Sprint(fewest["GET nodes"]+fewest["PATCH nodes"]))
	s.add("agent API requests per node (mean, with retries; client-side count)", fmt.Sprintf("%.2f", perNode))
	s.add("agent requests per node on nodes, nodes/status", fmt.Sprintf("%.2f", nodeReqs/float64(max(verified, 1))))
	server := requestDelta(before, after)
	s.add("API server requests per node (all clients; the benchmark's own are 3: node, pod, token)", fmt.Sprintf("%.2f", total(server)/float64(nodes)))
	apiCPU := after.sum("process_cpu_seconds_total") - before.sum("process_cpu_seconds_total")
	s.add("kube-apiserver CPU (process_cpu_seconds_total delta)", fmt.Sprintf("%.1f s (%.1f ms per node; %.2f cores over the %s until all verified)",
		apiCPU, apiCPU*1000/float64(nodes), apiCPU/allVerified.Seconds(), secs(allVerified)))
	s.add("kube-apiserver RSS after", mib(after.sum("process_resident_memory_bytes")))
	cpuLine := []string{}
	for _, k := range slices.Sorted(maps.Keys(cpuAfter)) {
		if d := cpuAfter[k] - cpuBefore[k]; d > 0 {
			cpuLine = append(cpuLine, fmt.Sprintf("%s %.1f s", k, d.Seconds()))
		}
	}
	s.add("control plane CPU (/proc, utime+stime)", strings.Join(cpuLine, ", "))
	benchCPU := (selfAfter - selfBefore).Seconds()
	s.add("in-process agents + benchmark CPU (getrusage)", fmt.Sprintf("%.1f s (%.1f ms per node; %.2f cores)", benchCPU,
		benchCPU*1000/float64(nodes), benchCPU/agentsDone.Seconds()))
	s.add("benchmark process peak RSS (in-process agents, their clients and connections)", mib(float64(peakRSS)))

	s.note("The agents run in this process (`agent.New` and `Run` with the installed configuration, as `main` does), each " +
		"with its own client, bearer token and TLS connection, and a token bound to its own pod, so the admission policy " +
		"applies as in a cluster. Agent processes would add what the footprint section shows per process (the Go " +
		"runtime's start and the binary's pages) to the same two cores; in one process the agents share the runtime. The " +
		"cores are shared: the control plane's CPU and the benchmark's together show how near the run came to the " +
		"machine's two. Node created to verified includes the benchmark's own creates per node (node, pod, token: the " +
		"provisioner's, the DaemonSet controller's and the kubelet's part); agent start to verified does not. An agent's " +
		"context ends when its node is seen verified, as the SIGTERM of the pod's deletion would. The benchmark creates " +
		"the agent pods unthrottled; in a cluster the DaemonSet controller creates them, at most kube-controller-manager's " +
		"--kube-api-qps a second (20 by default: 5000 pods take 250 s), so there the burst's pace is the controller's " +
		"before it is the API server's.")
	var b strings.Builder
	fmt.Fprintf(&b, "Agent requests of the %s run, counted in each agent's client (every attempt, with its status when not 2xx):\n\n", title)
	renderCounts(&b, agentReqs, max(verified, 1))
	fmt.Fprintf(&b, "\nEvery request the API server served during the %s run (`apiserver_request_total` delta), all clients: "+
		"the agents', the benchmark's (POST nodes, pods and serviceaccounts/token per node, standing in for the provisioner, the DaemonSet "+
		"controller and the kubelet; one WATCH of nodes), and the controllers' and scheduler's:\n\n", title)
	renderCounts(&b, server, nodes)
	durSum := seriesDelta(before, after, "apiserver_request_duration_seconds_sum")
	durCount := seriesDelta(before, after, "apiserver_request_duration_seconds_count")
	fmt.Fprintf(&b, "\nThe API server's mean time per request (`apiserver_request_duration_seconds`, from the request's arrival, "+
		"its queueing in API Priority and Fairness included; watches left out: they last as long as their client keeps them), "+
		"for the requests it served at least once per ten nodes:\n\n| request | mean |\n| --- | --- |\n")
	for _, k := range slices.Sorted(maps.Keys(durCount)) {
		if n := durCount[k]; n >= float64(nodes)/10 && !strings.HasPrefix(k, "WATCH") {
			fmt.Fprintf(&b, "| %s | %s |\n", k, ms(time.Duration(durSum[k]/n*float64(time.Second))))
		}
	}
	s.Notes = append(s.Notes, b.String())
	res.events = -1
	if seen, err := verifiedEventNodes(ctx, admin, names); err == nil {
		n := len(seen)
		s.verifiedEventsGoal(n, nodes)
		res.events = n
		var missing []string
		for _, name := range names {
			if _, _, released := nw.times(name); released && !seen[name] && len(missing) < 3 {
				missing = append(missing, fmt.Sprintf("- %s, its log's lines on Events:\n\n```\n%s\n```", name,
					linesWith(agents[name].log.Bytes(), "vent", 3)))
			}
		}
		if len(missing) > 0 {
			s.note("%d released nodes have no Verified Event. For example:", verified-n)
			s.Notes = append(s.Notes, missing...)
		}
	}
	rejected := after.sum("apiserver_flowcontrol_rejected_requests_total") - before.sum("apiserver_flowcontrol_rejected_requests_total")
	if rejected == 0 {
		s.add("requests rejected by API Priority and Fairness (429)", "0")
	} else {
		byLevel := map[string]float64{}
		for key, sm := range after {
			if sm.Name == "apiserver_flowcontrol_rejected_requests_total" {
				if d := sm.Value - before[key].Value; d > 0 {
					byLevel[fmt.Sprintf("%s/%s: %s", sm.Labels["priority_level"], sm.Labels["flow_schema"], sm.Labels["reason"])] += d
				}
			}
		}
		parts := []string{}
		for _, k := range slices.Sorted(maps.Keys(byLevel)) {
			parts = append(parts, fmt.Sprintf("%s %.0f", k, byLevel[k]))
		}
		s.add("requests rejected by API Priority and Fairness (429, retried by client-go)",
			fmt.Sprintf("%.0f (priority level/flow schema: reason: %s)", rejected, strings.Join(parts, "; ")))
		s.note("API Priority and Fairness rejected %.0f requests with 429; client-go waits for the Retry-After and sends them "+
			"again, and the client-side counts above include every attempt. Every agent authenticates as the same "+
			"ServiceAccount, kube-system/nodeready: the API server's default flow schema for kube-system's ServiceAccounts "+
			"puts them all into one flow of one priority level, so a burst beyond that level's seats and queues is "+
			"rejected, whatever the API server's other capacity.", rejected)
	}
	// How long the agents' requests queued in API Priority and Fairness, against how long
	// they ran: queueing with CPU to spare means the priority level's seats, not the
	// machine, set the pace.
	delta := func(name string) float64 {
		return after.sumWhere(name, "flow_schema", agentFlowSchema) - before.sumWhere(name, "flow_schema", agentFlowSchema)
	}
	if n := delta("apiserver_flowcontrol_request_wait_duration_seconds_count"); n > 0 {
		wait := delta("apiserver_flowcontrol_request_wait_duration_seconds_sum") / n
		execN := max(delta("apiserver_flowcontrol_request_execution_seconds_count"), 1)
		exec := delta("apiserver_flowcontrol_request_execution_seconds_sum") / execN
		s.add(fmt.Sprintf("API Priority and Fairness: the agents' flow schema %s (priority level %s, %.0f seats)", agentFlowSchema,
			agentPriorityLevel, after.sumWhere("apiserver_flowcontrol_nominal_limit_seats", "priority_level", agentPriorityLevel)),
			fmt.Sprintf("%.0f requests; mean wait in queue %s, mean execution %s", n, ms(time.Duration(wait*float64(time.Second))),
				ms(time.Duration(exec*float64(time.Second)))))
	}
	res.allVerified, res.complete = allVerified, s.Failures == 0
	res.p50, res.p99 = toVerified.pct(50), toVerified.pct(99)
	res.successPath, res.meanRequests = fewestTotal, perNode
	res.serverPerNode, res.apiCPUPerNode = total(server)/float64(nodes), apiCPU/float64(nodes)
	res.notReported = notReported
	res.rejected, res.benchCPU, res.peakRunning = rejected, benchCPU, running.peak.Load()
	for _, e := range errs {
		s.note("Not released: %s", e)
	}
	if notReported > 0 {
		s.note("%d agents released their node (the label was seen, in the same write as the taint's removal) but ended without "+
			"a `Verified node` line; their own phase times are left out above. For example:", notReported)
		for _, u := range unreported {
			s.note("- %s", u)
		}
	}
	return s, res
}

// scaleResult is what the comparison of scale runs shows.
type scaleResult struct {
	settle                      time.Duration
	allVerified, p50, p99       time.Duration
	complete                    bool
	successPath                 int
	meanRequests, serverPerNode float64
	apiCPUPerNode               float64 // seconds
	notReported                 int
	events                      int // nodes with a Verified Event; -1 when unknown
	nodes                       int
	rejected                    float64 // 429s from API Priority and Fairness
	benchCPU                    float64 // seconds: the in-process agents and the benchmark
	peakRunning                 int64
}

// compareScale puts the scale runs side by side and, for each SETTLE_TIME run at more than
// one size, shows how the figures grow from the smallest size to the largest.
func compareScale(results []*scaleResult) *section {
	s := &section{Title: "scale compared"}
	for _, r := range results {
		all := secs(r.allVerified)
		if !r.complete {
			all = "not all verified"
		}
		s.add(fmt.Sprintf("%d nodes, SETTLE_TIME=%s", r.nodes, r.settle), fmt.Sprintf(
			"all verified %s; per node p50 %s, p99 %s; success path %d requests, mean %.2f per node with retries; "+
				"API server %.2f requests and %.1f ms CPU per node, %.2f 429s per node; %d unreported; Verified Events on %d of %d nodes",
			all, secs(r.p50), secs(r.p99), r.successPath, r.meanRequests, r.serverPerNode, r.apiCPUPerNode*1000,
			r.rejected/float64(r.nodes), r.notReported, r.events, r.nodes))
	}
	bySettle := map[time.Duration][]*scaleResult{}
	for _, r := range results {
		bySettle[r.settle] = append(bySettle[r.settle], r)
	}
	for _, settle := range slices.Sorted(maps.Keys(bySettle)) {
		rs := bySettle[settle]
		if len(rs) < 2 {
			continue
		}
		small := slices.MinFunc(rs, func(a, b *scaleResult) int { return a.nodes - b.nodes })
		large := slices.MaxFunc(rs, func(a, b *scaleResult) int { return a.nodes - b.nodes })
		if small.nodes == large.nodes {
			continue
		}
		ratio := func(a, b float64) string {
			if a == 0 {
				return fmt.Sprintf("%.4g → %.4g", a, b)
			}
			return fmt.Sprintf("%.4g → %.4g (×%.2f)", a, b, b/a)
		}
		s.add(fmt.Sprintf("growth %d → %d nodes (×%.0f), SETTLE_TIME=%s", small.nodes, large.nodes,
			float64(large.nodes)/float64(small.nodes), settle), fmt.Sprintf(
			"all verified s %s; per node: API server CPU ms %s, API server requests %s, agent requests %s, 429s %s, "+
				"benchmark CPU ms %s; agents at once %s",
			ratio(small.allVerified.Seconds(), large.allVerified.Seconds()),
			ratio(small.apiCPUPerNode*1000, large.apiCPUPerNode*1000),
			ratio(small.serverPerNode, large.serverPerNode),
			ratio(small.meanRequests, large.meanRequests),
			ratio(small.rejected/float64(small.nodes), large.rejected/float64(large.nodes)),
			ratio(small.benchCPU*1000/float64(small.nodes), large.benchCPU*1000/float64(large.nodes)),
			ratio(float64(small.peakRunning), float64(large.peakRunning))))
	}
	note := "Each run has a control plane of its own on the same shared cores, so the load of the moment differs between " +
		"them too. Growth compares the per-node figures of the smallest and the largest size: ×1 is linear growth of the " +
		"total, above 1 costs more per node at the larger size."
	if _, off := bySettle[0]; off && len(bySettle) > 1 {
		note = "SETTLE_TIME=0 drops the settle watch: one WATCH per node, held open for the window. The success paths above " +
			"show every other difference. " + note
	}
	s.note("%s", note)
	return s
}

// runInProcess registers the node, creates its pod and token, and runs an agent for it in
// this process until agentCtx ends (the node is verified) and its release is complete.
// ctx bounds the registration.
func runInProcess(agentCtx, ctx context.Context, fast kubernetes.Interface, server, caFile string, base config.Config,
	settle time.Duration, a *inProcessAgent, run string, running *gauge) error {
	a.created = time.Now()
	if _, err := fast.CoreV1().Nodes().Create(ctx, newNode(a.node, run), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create node: %w", err)
	}
	token, err := agentToken(ctx, fast, a.node, run)
	if err != nil {
		return err
	}
	// A connection of its own, as each agent pod has: a custom Dial keeps client-go from
	// sharing one cached transport among all clients with the same TLS settings.
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	clients, err := wiring.NewClients(&rest.Config{
		Host:            server,
		TLSClientConfig: rest.TLSClientConfig{CAFile: caFile},
		BearerToken:     token,
		UserAgent:       "nodeready/bench",
		Dial:            dialer.DialContext,
		WrapTransport:   a.requests.wrap,
	})
	if err != nil {
		return err
	}
	cfg := base
	cfg.NodeName = a.node
	cfg.PodName, cfg.PodNamespace = "nodeready-"+a.node, harness.Namespace
	cfg.MetricsPort = 0 // any free port: a thousand agents share this process's addresses
	cfg.SettleTime = settle
	a.agentStarted = time.Now()
	running.inc()
	defer running.dec()
	ag, err := agent.New(cfg, wiring.NewLogger(cfg, &a.log), clients, agent.BuildInfo{Version: "bench"}, a.agentStarted)
	if err != nil {
		return err
	}
	return ag.Run(agentCtx)
}

// configFromCluster builds the agents' configuration as main does, from the installed
// nodeready-config and what the kubelet adds, through config.Load.
func configFromCluster(ctx context.Context, c *harness.Cluster, dns string) (config.Config, error) {
	cm, err := c.Client().CoreV1().ConfigMaps(harness.Namespace).Get(ctx, harness.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		return config.Config{}, fmt.Errorf("read %s: %w", harness.ConfigMapName, err)
	}
	host, port := c.ControlPlane().APIServerHostPort()
	env := maps.Clone(cm.Data)
	maps.Copy(env, map[string]string{
		"NODE_NAME":               "placeholder",
		"KUBERNETES_SERVICE_HOST": host,
		"KUBERNETES_SERVICE_PORT": port,
		"DNS_NAMESERVER":          dns,
	})
	// The agent pod's environment is exactly env: the variables the agent reads are
	// set from it, or unset, for this one Load; every agent gets a copy of its result.
	for _, v := range config.Variables() {
		if err := os.Unsetenv(v.Name); err != nil {
			return config.Config{}, err
		}
	}
	for name, value := range env {
		if err := os.Setenv(name, value); err != nil {
			return config.Config{}, err
		}
	}
	return config.Load(false)
}

// linesWith returns the last n lines of log that contain sub.
func linesWith(log []byte, sub string, n int) string {
	var out []string
	for line := range strings.SplitSeq(string(log), "\n") {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out[max(len(out)-n, 0):], "\n")
}
