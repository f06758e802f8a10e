package main

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/nodeready/nodeready/e2e/framework/harness"
	"github.com/nodeready/nodeready/e2e/framework/history"
	"github.com/nodeready/nodeready/internal/config"
	"github.com/nodeready/nodeready/internal/kube"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// The shared-fault benchmark: every joining node fails its dns check the same way (a
// DNS_TEST_DOMAINS name the cluster DNS answers NXDOMAIN for), with FAILURE_ACTION=replace-node.
// Each agent's action is due after MAX_RETRIES rounds; before it acts it reads the fleet's
// evidence (a LIST of nodes' metadata), finds no node of its configuration passed, and holds
// its node as SharedFault. It reads again at most once per RETRY_BACKOFF_MAX while its checks
// fail: what that costs the API server, with every node held, is what this measures.
const (
	sharedFaultNodes = 1000
	// sharedFaultDomain is a name no cluster has: CoreDNS answers NXDOMAIN, the fault the
	// dns check counts as the node's own.
	sharedFaultDomain = "not-in-this-cluster.example"
	// sharedFaultRounds: how many RETRY_BACKOFF_MAX the steady phase lasts once every node
	// reports SharedFault, each bringing about one evidence read per node.
	sharedFaultRounds = 4
	// sharedFaultTimeout bounds the wait for every node to report SharedFault.
	sharedFaultTimeout = 8 * time.Minute
)

// sharedFaultSettings are the run's configuration over the shipped one; -set changes them.
var sharedFaultSettings = map[string]string{
	"FAILURE_ACTION":    "replace-node",
	"DNS_TEST_DOMAINS":  sharedFaultDomain,
	"MAX_RETRIES":       "2",
	"RETRY_BACKOFF_MAX": "10s",
}

// runSharedFault runs a shared-fault run per node count: 1000 unless -nodes is given.
func runSharedFault(ctx context.Context, b *bench) []*section {
	sizes := sizeList{sharedFaultNodes}
	if b.o.nodesSet {
		sizes = b.o.nodes
	}
	var sections []*section
	for _, nodes := range sizes {
		if ctx.Err() != nil {
			break
		}
		sections = append(sections, sharedFaultBenchmark(ctx, b, nodes))
	}
	return sections
}

// sharedFaultBenchmark starts a control plane of its own with nodeready and
// manifests/replace-node/ installed and the DaemonSet removed, and runs the agents in this
// process as the scale benchmark does.
func sharedFaultBenchmark(ctx context.Context, b *bench, nodes int) *section {
	name := fmt.Sprintf("sharedfault-%d", nodes)
	o := b.o
	o.set = maps.Clone(sharedFaultSettings)
	maps.Copy(o.set, b.o.set)
	title := fmt.Sprintf("shared fault: %d joining nodes failing alike, FAILURE_ACTION=%s", nodes, o.set["FAILURE_ACTION"])
	c, err := startCluster(ctx, o, name, b.m, b.logf)
	if err != nil {
		return &section{Title: title, Err: err}
	}
	defer c.Stop()
	if err := removeDaemonSet(ctx, c); err != nil {
		return &section{Title: title, Err: err}
	}
	if out, err := c.Kubectl(ctx, "apply", "-f", filepath.Join(o.repo, "manifests", "replace-node")); err != nil {
		return &section{Title: title, Err: fmt.Errorf("kubectl apply -f manifests/replace-node: %w: %s", err, out)}
	}
	dnsLogs := ""
	if o.logDir != "" {
		dnsLogs = filepath.Join(o.logDir, name, "coredns")
	}
	dns, err := startClusterDNS(ctx, dnsLogs)
	if err != nil {
		return &section{Title: title, Err: err}
	}
	defer dns.stop()
	base, err := configFromCluster(ctx, c, dns.addr)
	if err != nil {
		return &section{Title: title, Err: err}
	}
	b.logf("sharedfault: %d nodes at once failing DNS_TEST_DOMAINS=%s alike, %s, MAX_RETRIES=%d, RETRY_BACKOFF_MAX=%s (load average %s)",
		nodes, o.set["DNS_TEST_DOMAINS"], base.FailureAction, base.MaxRetries, base.RetryBackoffMax, loadavg())
	s := benchSharedFault(ctx, c, base, nodes, o.set["DNS_TEST_DOMAINS"])
	s.Title = title
	b.logf("sharedfault: done")
	return s
}

// sharedFaultRun is one shared-fault run.
type sharedFaultRun struct {
	*scaleRun
	reasons *history.Recorder[string]
	domains string // DNS_TEST_DOMAINS
	// scrapes and client-side counts: before the burst, when every node reports
	// SharedFault, and sharedFaultRounds RETRY_BACKOFF_MAX later.
	m0, m1, m2          metricSet
	c1, c2              map[string]int
	b1, b2              int64
	t0, t1, t2          time.Time
	cpu0, cpu1, cpu2    float64
	idleCPU, idleWindow float64
	calibration         readCost
}

// reason is the reason of the node's nodeready condition, "" without one.
func reason(n *corev1.Node) string {
	for _, c := range n.Status.Conditions {
		if c.Type == wellknown.ConditionType {
			return c.Reason
		}
	}
	return ""
}

func benchSharedFault(ctx context.Context, c *harness.Cluster, base config.Config, nodes int, domains string) *section {
	const run = "sharedfault"
	sr, err := newScaleRun(c, base, nodes, base.SettleTime, run)
	if err != nil {
		return &section{Err: err}
	}
	r := &sharedFaultRun{scaleRun: sr, domains: domains}
	s := &section{}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	if r.reasons, err = history.Record(watchCtx, history.Nodes(r.admin, metav1.ListOptions{LabelSelector: benchLabel + "=" + run}), reason); err != nil {
		s.Err = err
		return s
	}
	// The API server idle, for comparison: nothing but the controllers and this watch.
	idle0, err := scrapeAPIServer(ctx, r.admin)
	if err != nil {
		s.Err = err
		return s
	}
	idleStart := time.Now()
	time.Sleep(10 * time.Second)
	if r.m0, err = scrapeAPIServer(ctx, r.admin); err != nil {
		s.Err = err
		return s
	}
	r.idleWindow = time.Since(idleStart).Seconds()
	r.idleCPU = r.m0.sum("process_cpu_seconds_total") - idle0.sum("process_cpu_seconds_total")
	r.cpu0 = r.m0.sum("process_cpu_seconds_total")

	r.t0 = time.Now()
	r.start = r.t0
	var wg sync.WaitGroup
	for _, name := range r.names {
		a := r.agents[name]
		agentCtx, cancel := context.WithCancel(ctx)
		a.cancel = cancel
		wg.Go(func() {
			defer close(a.done)
			defer cancel()
			a.err = runInProcess(agentCtx, ctx, r.fast, r.cp.APIServerURL(), r.cp.CAFile(), r.base, r.settle, a, run, &r.running)
		})
	}
	stopAll := func() {
		for _, a := range r.agents {
			a.cancel()
		}
		wg.Wait()
	}

	// Every node reports SharedFault (or its agent is gone), or the time is up.
	deadline, cancelWait := context.WithTimeout(ctx, sharedFaultTimeout)
	for _, name := range r.names {
		waitCtx, stop := context.WithCancel(deadline)
		go func() {
			select {
			case <-r.agents[name].done:
				stop()
			case <-waitCtx.Done():
			}
		}()
		_, _ = r.reasons.Wait(waitCtx, name, shared)
		stop()
		if deadline.Err() != nil {
			break
		}
	}
	cancelWait()
	r.t1 = time.Now()
	if r.m1, err = scrapeAPIServer(ctx, r.admin); err != nil {
		stopAll()
		s.Err = err
		return s
	}
	r.cpu1 = r.m1.sum("process_cpu_seconds_total")
	r.c1, r.b1 = r.agentCounts()

	// The steady phase: every node held as SharedFault, its agent's rounds going on.
	steady := time.Duration(sharedFaultRounds) * base.RetryBackoffMax
	select {
	case <-ctx.Done():
	case <-time.After(steady):
	}
	r.t2 = time.Now()
	r.m2, err = scrapeAPIServer(ctx, r.admin)
	r.c2, r.b2 = r.agentCounts()
	stopAll()
	if err != nil {
		s.Err = err
		return s
	}
	r.cpu2 = r.m2.sum("process_cpu_seconds_total")
	r.calibration, err = r.calibrate(ctx, base)
	if err != nil {
		s.note("No measure of one evidence read alone: %v", err)
	}
	r.report(ctx, s, base)
	return s
}

// calibrationReads is how many evidence reads calibrate sends one after the other.
const calibrationReads = 50

// readCost is what evidence reads cost the API server, sent one at a time with the agents
// stopped: its CPU, the time each took and what it returned.
type readCost struct {
	reads, items int
	cpu, wall    time.Duration // per read
	bytes        float64       // per read, after gzip decoding
}

// calibrate sends calibrationReads evidence reads as an agent sends them (its client,
// NodesMetadata, the config label's values, resourceVersion 0), one at a time, once the
// agents have stopped: the API server's CPU per read, apart from everything else the agents
// cost it.
func (r *sharedFaultRun) calibrate(ctx context.Context, base config.Config) (readCost, error) {
	var c readCost
	key := wellknown.ConfigLabel(base.VerifiedLabel)
	list, err := r.admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: key})
	if err != nil {
		return c, err
	}
	values := map[string]bool{}
	for _, n := range list.Items {
		values[n.Labels[key]] = true
	}
	req, err := labels.NewRequirement(key, selection.In, slices.Sorted(maps.Keys(values)))
	if err != nil {
		return c, err
	}
	counter := newRequestCounter()
	cfg := r.cp.RESTConfig()
	cfg.QPS, cfg.Burst = -1, 0
	cfg.WrapTransport = counter.wrap
	client, err := kube.NewForConfig(cfg)
	if err != nil {
		return c, err
	}
	time.Sleep(2 * time.Second) // the agents' last requests end
	before, err := scrapeAPIServer(ctx, r.admin)
	if err != nil {
		return c, err
	}
	start := time.Now()
	for range calibrationReads {
		l, err := client.CoreV1().NodesMetadata(ctx, metav1.ListOptions{LabelSelector: labels.NewSelector().Add(*req).String(), ResourceVersion: "0"})
		if err != nil {
			return c, err
		}
		c.items = len(l.Items)
	}
	wall := time.Since(start)
	after, err := scrapeAPIServer(ctx, r.admin)
	if err != nil {
		return c, err
	}
	cpu := after.sum("process_cpu_seconds_total") - before.sum("process_cpu_seconds_total")
	// The API server's own idle work over the same time is not the reads'.
	cpu -= r.idleCPU / r.idleWindow * wall.Seconds()
	c.reads = calibrationReads
	c.cpu = time.Duration(cpu / calibrationReads * float64(time.Second))
	c.wall = wall / calibrationReads
	c.bytes = float64(counter.listBytes()) / calibrationReads
	return c, nil
}

// agentCounts sums every agent's requests and the bytes of its LISTs of nodes.
func (r *sharedFaultRun) agentCounts() (map[string]int, int64) {
	all := map[string]int{}
	var bytes int64
	for _, a := range r.agents {
		for k, v := range a.requests.snapshot() {
			all[k] += v
		}
		bytes += a.requests.listBytes()
	}
	return all, bytes
}

// diff is after minus before, per kind of request.
func diff(before, after map[string]int) map[string]int {
	d := map[string]int{}
	for k, v := range after {
		if n := v - before[k]; n > 0 {
			d[k] = n
		}
	}
	return d
}

// listNodes is what the API server served for LISTs of nodes between two scrapes, all
// clients: requests, and bytes by apiserver_response_sizes.
func listNodes(before, after metricSet) (requests, bytes, sized float64) {
	requests = seriesDelta(before, after, "apiserver_request_total")["LIST nodes"]
	bytes = seriesDelta(before, after, "apiserver_response_sizes_sum")["LIST nodes"]
	sized = seriesDelta(before, after, "apiserver_response_sizes_count")["LIST nodes"]
	return requests, bytes, sized
}

func (r *sharedFaultRun) report(ctx context.Context, s *section, base config.Config) {
	n := float64(r.nodes)
	// Who reports SharedFault, and when.
	var toShared durations
	reported, deletedSeen := 0, 0
	for _, name := range r.names {
		es := r.reasons.Entries(name)
		if e, ok := history.First(es, isShared); ok {
			reported++
			toShared = append(toShared, e.At.Sub(r.agents[name].created))
		}
		if _, ok := history.First(es, func(e history.Entry[string]) bool { return e.Deleted }); ok {
			deletedSeen++
		}
	}
	s.Failures = r.nodes - reported
	s.add("nodes", fmt.Sprint(r.nodes))
	s.add("configuration", fmt.Sprintf("DNS_TEST_DOMAINS=%s (NXDOMAIN on every node), FAILURE_ACTION=%s, MAX_RETRIES=%d, RETRY_BACKOFF_MAX=%s, FLEET_WINDOW=%s",
		r.domains, base.FailureAction, base.MaxRetries, base.RetryBackoffMax, base.FleetWindow))
	s.goal("nodes reporting SharedFault (condition reason)", fmt.Sprintf("%d of %d", reported, r.nodes), "every node", reported == r.nodes)
	s.add("time until every node reported SharedFault (first create to last seen)", secs(r.t1.Sub(r.t0)))
	s.add("per node: node created to SharedFault", toShared.summary(true))
	s.add("steady phase: from every node reporting SharedFault (or the wait's end) on", fmt.Sprintf("%s (%d × RETRY_BACKOFF_MAX)", secs(r.t2.Sub(r.t1)), sharedFaultRounds))

	// No node deleted: the agents' DELETEs, the API server's, and the nodes still there.
	list, err := r.admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: benchLabel + "=sharedfault"})
	remaining := "unknown: " + fmt.Sprint(err)
	if err == nil {
		remaining = fmt.Sprint(len(list.Items))
	}
	agentDeletes := countsFor(r.c2, "DELETE nodes")
	serverDeletes := requestDelta(r.m0, r.m2)["DELETE nodes"]
	s.goal("nodes deleted: agents' DELETE nodes / API server's DELETE nodes / deletions seen / nodes left",
		fmt.Sprintf("%d / %.0f / %d / %s of %d", agentDeletes, serverDeletes, deletedSeen, remaining, r.nodes), "0 / 0 / 0 / every node",
		agentDeletes == 0 && serverDeletes == 0 && deletedSeen == 0 && err == nil && len(list.Items) == r.nodes)

	// The evidence reads.
	steadySecs := r.t2.Sub(r.t1).Seconds()
	reads, phaseReads := countsFor(r.c2, evidenceRead), countsFor(diff(r.c1, r.c2), evidenceRead)
	s.add("evidence reads (agents' LISTs of nodes), whole run", fmt.Sprintf("%d: %.2f per node", reads, float64(reads)/n))
	s.add("evidence reads, steady phase", fmt.Sprintf("%d: %.2f per node, %.1f per second (%.2f per node per RETRY_BACKOFF_MAX)",
		phaseReads, float64(phaseReads)/n, float64(phaseReads)/steadySecs, float64(phaseReads)/n/(steadySecs/base.RetryBackoffMax.Seconds())))
	phaseBytes := r.b2 - r.b1
	s.add("bytes the agents' LISTs of nodes returned (client side, decoded)", fmt.Sprintf("whole run %s (%s per read); steady phase %s, %s/s",
		kib(float64(r.b2)), kib(float64(r.b2)/float64(max(reads, 1))), kib(float64(phaseBytes)), kib(float64(phaseBytes)/steadySecs)))
	if req, bytes, sized := listNodes(r.m1, r.m2); sized > 0 {
		s.add("API server: LIST nodes in the steady phase, all clients (apiserver_request_total, apiserver_response_sizes)",
			fmt.Sprintf("%.0f requests; %s returned, %s per response, %s/s", req, kib(bytes), kib(bytes/sized), kib(bytes/steadySecs)))
	}
	if req, bytes, sized := listNodes(r.m0, r.m2); sized > 0 {
		s.add("API server: LIST nodes over the whole run, all clients", fmt.Sprintf("%.0f requests; %s returned, %s per response", req, kib(bytes), kib(bytes/sized)))
	}
	durSum := seriesDelta(r.m1, r.m2, "apiserver_request_duration_seconds_sum")["LIST nodes"]
	durCount := seriesDelta(r.m1, r.m2, "apiserver_request_duration_seconds_count")["LIST nodes"]
	if durCount > 0 {
		s.add("API server: mean time per LIST of nodes, steady phase", ms(time.Duration(durSum/durCount*float64(time.Second))))
	}

	if c := r.calibration; c.reads > 0 {
		s.add(fmt.Sprintf("a list of the %d nodes failing alike, alone (%d lists one at a time, agents stopped): what a read costs when a node of the configuration passed, so that the failing ones are listed too", c.items, c.reads),
			fmt.Sprintf("kube-apiserver CPU %s per read (idle subtracted); %s per read; %s returned per read", ms(c.cpu), ms(c.wall), kib(c.bytes)))
		for _, every := range []time.Duration{base.RetryBackoffMax, 30 * time.Second} {
			perSecond := n / every.Seconds()
			s.add(fmt.Sprintf("projected, were every node to list the failing ones once per RETRY_BACKOFF_MAX=%s (the reads back off to 16 intervals while the fault looks shared), %d nodes failing alike", every, r.nodes),
				fmt.Sprintf("%.1f reads/s × %s = %.2f cores of kube-apiserver; %s/s returned", perSecond, ms(c.cpu), perSecond*c.cpu.Seconds(), kib(perSecond*c.bytes)))
		}
	}

	// CPU.
	idle := r.idleCPU / r.idleWindow
	s.add("kube-apiserver CPU, steady phase (process_cpu_seconds_total delta)", fmt.Sprintf("%.1f s over %s: %.2f cores (idle before the burst: %.2f cores)",
		r.cpu2-r.cpu1, secs(r.t2.Sub(r.t1)), (r.cpu2-r.cpu1)/steadySecs, idle))
	s.add("kube-apiserver CPU, burst until every node reported SharedFault", fmt.Sprintf("%.1f s over %s: %.2f cores, %.1f ms per node",
		r.cpu1-r.cpu0, secs(r.t1.Sub(r.t0)), (r.cpu1-r.cpu0)/r.t1.Sub(r.t0).Seconds(), (r.cpu1-r.cpu0)*1000/n))
	s.add("kube-apiserver RSS after", mib(r.m2.sum("process_resident_memory_bytes")))
	rejected := r.m2.sum("apiserver_flowcontrol_rejected_requests_total") - r.m0.sum("apiserver_flowcontrol_rejected_requests_total")
	rejectedSteady := r.m2.sum("apiserver_flowcontrol_rejected_requests_total") - r.m1.sum("apiserver_flowcontrol_rejected_requests_total")
	s.add("requests rejected by API Priority and Fairness (429): whole run / steady phase", fmt.Sprintf("%.0f / %.0f", rejected, rejectedSteady))

	// Requests per node.
	phase := diff(r.c1, r.c2)
	s.add("agent requests per node, whole run (client side)", fmt.Sprintf("%.2f", float64(sumAll(r.c2))/n))
	s.add("agent requests per node, steady phase (client side)", fmt.Sprintf("%.2f: %s", float64(sumAll(phase))/n, perNode(phase, n)))

	s.note("Every node's dns check fails alike (`DNS_TEST_DOMAINS=%s`: CoreDNS answers NXDOMAIN, counted as the node's own fault), "+
		"with `FAILURE_ACTION=%s` and manifests/replace-node/ applied. The agents run in this process as in the scale benchmark. After "+
		"MAX_RETRIES rounds each agent's action is due: it reads the fleet's evidence (a LIST of the metadata of the nodes of its "+
		"configuration that are verified, by the config label, from the watch cache), finds none that passed, and holds its node as "+
		"SharedFault, without listing the failing nodes; it reads again after RETRY_BACKOFF_MAX, then twice as far apart each time, "+
		"up to 16 intervals. The steady phase starts once every node reported SharedFault and lasts %d × RETRY_BACKOFF_MAX: its "+
		"figures are what a fault shared by every joining node costs the API server for as long as it lasts. Only when a node of the "+
		"configuration passed does a read list the failing nodes too, and its size then grows with their number (the alone row "+
		"measures that list). RETRY_BACKOFF_MAX is 30s as shipped, %s here.", r.domains, base.FailureAction, sharedFaultRounds, base.RetryBackoffMax)
	var tb strings.Builder
	fmt.Fprintf(&tb, "Agent requests of the %d-node shared-fault run, counted in each agent's client (every attempt, with its status when not 2xx), whole run:\n\n", r.nodes)
	renderCounts(&tb, toFloat(r.c2), r.nodes)
	fmt.Fprintf(&tb, "\nThe same in the steady phase only (%s):\n\n", secs(r.t2.Sub(r.t1)))
	renderCounts(&tb, toFloat(phase), r.nodes)
	fmt.Fprintf(&tb, "\nEvery request the API server served in the steady phase (`apiserver_request_total` delta), all clients:\n\n")
	renderCounts(&tb, requestDelta(r.m1, r.m2), r.nodes)
	s.Notes = append(s.Notes, tb.String())
	for _, name := range r.names {
		if a := r.agents[name]; !shared(r.reasons.Entries(name)) {
			s.note("Not SharedFault: %s (run error: %v), last lines of its log:\n\n```\n%s\n```", name, a.err, lastLines(a.log.Bytes(), 3))
			break
		}
	}
}

func isShared(e history.Entry[string]) bool {
	return e.State == string(wellknown.SharedFault) && !e.Deleted
}

// shared reports whether a node's history has it reporting SharedFault.
func shared(es []history.Entry[string]) bool {
	_, ok := history.First(es, isShared)
	return ok
}

func sumAll(m map[string]int) int {
	t := 0
	for _, v := range m {
		t += v
	}
	return t
}

// perNode renders counts per node on one line, the most frequent first.
func perNode(counts map[string]int, n float64) string {
	keys := slices.SortedFunc(maps.Keys(counts), func(a, b string) int {
		if c := cmp.Compare(counts[b], counts[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, float64(counts[k])/n))
	}
	return strings.Join(parts, ", ")
}

// kib renders bytes in KiB, or MiB above one.
func kib(b float64) string {
	if b >= 1<<20 {
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	}
	return fmt.Sprintf("%.1f KiB", b/1024)
}
