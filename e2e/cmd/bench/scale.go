package main

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodeready/nodeready/agent"
	"github.com/nodeready/nodeready/e2e/harness"
)

// Goals of the scale benchmark.
const (
	scaleGoal           = 30 * time.Second
	requestsPerNodeGoal = 3
)

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

// benchScale registers nodes at once, each with its agent pod and a token bound to it, and
// verifies each with an agent running in this process (agent.New and Run, as main does,
// with the installed configuration, a client of its own and its own connection). When an
// agent's node is seen verified its context ends, as the SIGTERM of the pod's deletion
// does; it finishes its release and settle window and returns.
func benchScale(ctx context.Context, c *harness.Cluster, base agent.Config, nodes int, settle time.Duration, run string) (*section, *scaleResult) {
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
			a.err = runInProcess(agentCtx, ctx, fast, cp.APIServerURL(), cp.CAFile(), base, settle, a, run)
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
	// No cleanup: the control plane is the run's own and stops with it.

	var (
		toVerified, fromAgent durations
		own                   phases
		errs, unreported      []string
		notReported           int
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
	own.rows(s, "agent: ")

	// All agents' requests; and the fewest one agent needed to release its node (the
	// success path: first round passed, nothing retried), with how many agents needed
	// exactly that many.
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
		if _, _, ok := nw.times(name); !ok {
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
	s.goal("agent API requests on the success path (fewest of one agent)", fmt.Sprintf("%d: %s (%d of %d agents)", fewestTotal, breakdown(fewest), atFewest, verified),
		fmt.Sprintf("<= %d", requestsPerNodeGoal), fewestTotal <= requestsPerNodeGoal)
	s.add("of which the release itself (GET nodes, PATCH nodes)", fmt.Sprint(fewest["GET nodes"]+fewest["PATCH nodes"]))
	s.add("agent API requests per node (mean, with retries; client-side count)", fmt.Sprintf("%.2f", perNode))
	s.add("agent requests per node on nodes, nodes/status", fmt.Sprintf("%.2f", nodeReqs/float64(max(verified, 1))))
	server := requestDelta(before, after)
	s.add("API server requests per node (all clients; the benchmark's own are 3: node, pod, token)", fmt.Sprintf("%.2f", total(server)/float64(nodes)))
	apiCPU := after.sum("process_cpu_seconds_total") - before.sum("process_cpu_seconds_total")
	s.add("kube-apiserver CPU (process_cpu_seconds_total delta)", fmt.Sprintf("%.1f s (%.1f ms per node)", apiCPU, apiCPU*1000/float64(nodes)))
	s.add("kube-apiserver RSS after", mib(after.sum("process_resident_memory_bytes")))
	cpuLine := []string{}
	for _, k := range slices.Sorted(maps.Keys(cpuAfter)) {
		if d := cpuAfter[k] - cpuBefore[k]; d > 0 {
			cpuLine = append(cpuLine, fmt.Sprintf("%s %.1f s", k, d.Seconds()))
		}
	}
	s.add("control plane CPU (/proc, utime+stime)", strings.Join(cpuLine, ", "))
	s.add("in-process agents + benchmark CPU (getrusage)", fmt.Sprintf("%.1f s (%.1f ms per node)", (selfAfter-selfBefore).Seconds(),
		float64(selfAfter-selfBefore)/float64(time.Millisecond)/float64(nodes)))

	s.note("The agents run in this process (`agent.New` and `Run` with the installed configuration, as `main` does), each " +
		"with its own client, bearer token and TLS connection, and a token bound to its own pod, so the admission policy " +
		"applies as in a cluster. A thousand agent processes would add what the footprint section shows per process " +
		"(the Go runtime's start, about 25 MiB resident each) to the same two cores; in one process the agents share the " +
		"runtime. Node created to verified includes the benchmark's own creates per node (node, pod, token: the " +
		"provisioner's, the DaemonSet controller's and the kubelet's part); agent start to verified does not. An agent's " +
		"context ends when its node is seen verified, as the SIGTERM of the pod's deletion would.")
	var b strings.Builder
	fmt.Fprintf(&b, "Agent requests of the %s run, counted in each agent's client (every attempt, with its status when not 2xx):\n\n", title)
	renderCounts(&b, agentReqs, max(verified, 1))
	fmt.Fprintf(&b, "\nEvery request the API server served during the %s run (`apiserver_request_total` delta), all clients: "+
		"the agents', the benchmark's (POST nodes, pods and serviceaccounts/token per node, standing in for the provisioner, the DaemonSet "+
		"controller and the kubelet; one WATCH of nodes), and the controllers' and scheduler's:\n\n", title)
	renderCounts(&b, server, nodes)
	s.Notes = append(s.Notes, b.String())
	res.events = -1
	if n, err := verifiedEvents(ctx, admin, names); err == nil {
		s.goal("nodes with a Verified Event", fmt.Sprintf("%d of %d", n, nodes), "every node", n == nodes)
		res.events = n
	}
	if rejected := after.sum("apiserver_flowcontrol_rejected_requests_total") - before.sum("apiserver_flowcontrol_rejected_requests_total"); rejected > 0 {
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
	res.allVerified, res.complete = allVerified, s.Failures == 0
	res.p50, res.p99 = toVerified.pct(50), toVerified.pct(99)
	res.successPath, res.meanRequests = fewestTotal, perNode
	res.serverPerNode, res.apiCPUPerNode = total(server)/float64(nodes), apiCPU/float64(nodes)
	res.notReported = notReported
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
}

// compareScale puts the scale runs side by side.
func compareScale(results []*scaleResult) *section {
	s := &section{Title: "scale compared"}
	for _, r := range results {
		all := secs(r.allVerified)
		if !r.complete {
			all = "not all verified"
		}
		s.add(fmt.Sprintf("SETTLE_TIME=%s", r.settle), fmt.Sprintf(
			"all verified %s; per node p50 %s, p99 %s; success path %d requests, mean %.2f per node with retries; "+
				"API server %.2f requests and %.1f ms CPU per node; %d unreported; Verified Events on %d of %d nodes",
			all, secs(r.p50), secs(r.p99), r.successPath, r.meanRequests, r.serverPerNode, r.apiCPUPerNode*1000, r.notReported,
			r.events, r.nodes))
	}
	s.note("SETTLE_TIME=0 drops the settle watch: one WATCH per node, held open for the window. The success paths above show " +
		"every other difference. Each run has a control plane of its own on the same shared cores, so the load of the moment " +
		"differs between them too.")
	return s
}

// runInProcess registers the node, creates its pod and token, and runs an agent for it in
// this process until agentCtx ends (the node is verified) and its release is complete.
// ctx bounds the registration.
func runInProcess(agentCtx, ctx context.Context, fast kubernetes.Interface, server, caFile string, base agent.Config,
	settle time.Duration, a *inProcessAgent, run string) error {
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
	kube, err := kubernetes.NewForConfig(&rest.Config{
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
	ag, err := agent.New(cfg, agent.NewLogger(cfg, &a.log), agent.Clients{Kube: kube}, agent.BuildInfo{Version: "bench"}, a.agentStarted)
	if err != nil {
		return err
	}
	return ag.Run(agentCtx)
}

// configFromCluster builds the agents' configuration as main does, from the installed
// nodeready-config and what the kubelet adds, through agent.LoadConfig.
func configFromCluster(ctx context.Context, c *harness.Cluster, dns string) (agent.Config, error) {
	cm, err := c.Client().CoreV1().ConfigMaps(harness.Namespace).Get(ctx, harness.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		return agent.Config{}, fmt.Errorf("read %s: %w", harness.ConfigMapName, err)
	}
	host, port := c.ControlPlane().APIServerHostPort()
	env := maps.Clone(cm.Data)
	maps.Copy(env, map[string]string{
		"NODE_NAME":               "placeholder",
		"KUBERNETES_SERVICE_HOST": host,
		"KUBERNETES_SERVICE_PORT": port,
		"DNS_NAMESERVER":          dns,
	})
	// LoadConfig reads the environment; this process sets it only here, and puts it back.
	saved := map[string]*string{}
	for k, v := range env {
		if old, ok := os.LookupEnv(k); ok {
			saved[k] = &old
		} else {
			saved[k] = nil
		}
		os.Setenv(k, v)
	}
	cfg, err := agent.LoadConfig(false)
	for k, old := range saved {
		if old == nil {
			os.Unsetenv(k)
		} else {
			os.Setenv(k, *old)
		}
	}
	return cfg, err
}
