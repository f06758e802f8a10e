package main

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/pprof/profile"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodeready/nodeready/agent"
	"github.com/nodeready/nodeready/e2e/framework/controlplane"
	"github.com/nodeready/nodeready/e2e/framework/harness"
	"github.com/nodeready/nodeready/internal/config"
	"github.com/nodeready/nodeready/internal/wellknown"
	"github.com/nodeready/nodeready/internal/wiring"
)

// Goals of the scale benchmark: 5000 nodes, the scalability limit of one cluster, each
// released and reported, with no more requests than the success path's 6 (the checks' two,
// the condition, the label and taint, the Verified Event, the watch). What nodeready adds to
// the burst's own creates (time, requests, API server CPU per node) is measured, not held to
// a time: the burst's wall time is the machine's and the benchmark's on these two cores, and
// in a cluster the DaemonSet controller's pace (see reportNotes).
const successPathGoal = 6

// controllerQPS is kube-controller-manager's default --kube-api-qps: in a cluster the DaemonSet
// controller creates the agent pods no faster than that.
const controllerQPS = 20

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

// createsAftermath is waited after the creates before the agents start: what the creates set
// off in the controllers (the node lifecycle controller's first look at each node) counts to
// them, not to the agents.
const createsAftermath = 2 * time.Second

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
	token        string       // bound to its pod, from the creates' phase
	dials        atomic.Int32 // connections its client opened to the API server
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

// sampleRSS reads this process's VmRSS and counts its open files every interval until ctx
// ends, and returns the largest of each through the function it returns, which waits for the
// sampler to stop.
func sampleRSS(ctx context.Context, interval time.Duration) func() (rss, files int64) {
	var peak, peakFiles int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			if st, err := procStatus(os.Getpid()); err == nil {
				peak = max(peak, st["VmRSS"])
			}
			if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
				peakFiles = max(peakFiles, int64(len(fds)))
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() (int64, int64) { <-done; return peak, peakFiles }
}

// The API server's default flow schema for ServiceAccounts of kube-system, nodeready's
// among them, and its priority level.
const (
	agentFlowSchema    = "kube-system-service-accounts"
	agentPriorityLevel = "workload-high"
)

// benchScale registers nodes at once, each with its agent pod and a token bound to it (the
// creates' phase, no agent running), then starts an agent for each at once, running in this
// process (agent.New and Run, as main does, with the installed configuration, a client of its
// own and its own connection): the agents' phase. When an agent's node is seen verified its
// context ends, as the SIGTERM of the pod's deletion does; it finishes its release and settle
// window and returns. The two phases, on the same control plane with the same nodes, pods and
// tokens, tell what nodeready adds to the burst (time, requests, API server CPU) from what the
// creates cost without it.
//
// The API server's CPU is profiled over the whole burst, to show where its time goes. With a
// logs directory the profile is written there too (go tool pprof reads it), and each agent's
// log into its agents/ directory, one file per node.
func benchScale(ctx context.Context, c *harness.Cluster, base config.Config, nodes int, settle time.Duration, pace float64, run, logDir string) (*section, *scaleResult) {
	profile := ""
	if logDir != "" {
		profile = filepath.Join(logDir, "kube-apiserver.cpu.pprof")
	}
	r, err := newScaleRun(c, base, nodes, settle, run)
	r.pace = pace
	if err != nil {
		return &section{Title: r.title, Err: err}, nil
	}
	s := &section{Title: r.title}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	if r.nw, err = watchNodes(watchCtx, r.admin, benchLabel+"="+run, r.onLabelled); err != nil {
		s.Err = err
		return s, nil
	}
	if err := r.burst(ctx, s, profile); err != nil {
		s.Err = err
		return s, nil
	}
	if logDir != "" {
		if err := r.writeAgentLogs(filepath.Join(logDir, "agents")); err != nil {
			s.note("The agents' logs could not be kept: %v", err)
		}
	}
	// No cleanup: the control plane is the run's own and stops with it.
	r.collect(s)
	r.reportTimes(s)
	r.reportRequests(s)
	r.reportCPU(s)
	r.reportNotes(s)
	if r.profile != nil {
		reportProfile(s, r.profile)
	}
	res := &scaleResult{settle: settle, nodes: nodes, pace: pace}
	r.reportEvents(ctx, s, res)
	r.reportAgreement(ctx, s)
	r.reportFairness(s, res)
	r.result(s, res)
	r.reportFailures(s)
	return s, res
}

// scaleRun is one scale run: its agents, the watch of their nodes, and what it measured.
type scaleRun struct {
	run, title string
	nodes      int
	settle     time.Duration
	pace       float64 // agents started a second, as the DaemonSet controller creates their pods; 0: all at once
	base       config.Config
	admin      kubernetes.Interface
	cp         *controlplane.ControlPlane
	fast       kubernetes.Interface // the benchmark's own writes, unthrottled
	names      []string
	agents     map[string]*inProcessAgent
	cancelMu   sync.Mutex // guards the agents' cancel
	nw         *nodeWatch

	// burst: before the creates, mid between the creates and the agents, after the agents
	before, mid, after             metricSet
	cpuBefore, cpuMid, cpuAfter    map[string]time.Duration
	selfBefore, selfMid, selfAfter time.Duration
	running                        gauge
	start, agentsStart             time.Time
	creates                        time.Duration // first create to the last token: the creates' phase
	allVerified, agentsDone        time.Duration // from agentsStart: nodeready's added time, its settle windows
	peakRSS, peakFiles             int64
	openFilesLimit                 uint64
	lostToLimits                   []string         // agents that hit the benchmark's own open files limit
	profile                        *profile.Profile // the API server's CPU over the burst

	// collect
	toVerified, fromAgent durations
	own                   phases
	errs, unreported      []string
	notReported           int
	reported              map[string]bool // released, and the agent said so
	verified              int
	lastStart             time.Duration

	// reportRequests
	agentReqs               map[string]float64
	fewestTotal             int
	perNode                 float64
	server                  map[string]float64
	apiCPU                  float64
	createsCPU, agentsCPU   float64 // kube-apiserver's, seconds, in each phase
	createsReqs, agentsReqs float64 // what kube-apiserver served in each phase, all clients
	benchCPU                float64
}

// newScaleRun names the run's nodes and their agents and makes the benchmark's unthrottled
// client: its own writes (nodes, pods, tokens) go out "at once".
func newScaleRun(c *harness.Cluster, base config.Config, nodes int, settle time.Duration, run string) (*scaleRun, error) {
	r := &scaleRun{
		run: run, title: fmt.Sprintf("scale %d, SETTLE_TIME=%s", nodes, settle), nodes: nodes, settle: settle, base: base,
		admin: c.Client(), cp: c.ControlPlane(),
		agents: make(map[string]*inProcessAgent, nodes), names: make([]string, 0, nodes), reported: map[string]bool{},
	}
	fastCfg := r.cp.RESTConfig()
	fastCfg.QPS, fastCfg.Burst = -1, 0
	fast, err := kubernetes.NewForConfig(fastCfg)
	if err != nil {
		return r, err
	}
	r.fast = fast
	for i := range nodes {
		name := fmt.Sprintf("%s-%d", run, i)
		r.names = append(r.names, name)
		r.agents[name] = &inProcessAgent{node: name, done: make(chan struct{}), requests: newRequestCounter()}
	}
	return r, nil
}

// onLabelled ends the agent of a node seen verified, as the pod's deletion would.
func (r *scaleRun) onLabelled(node string, _ time.Time) {
	r.cancelMu.Lock()
	defer r.cancelMu.Unlock()
	if a := r.agents[node]; a != nil && a.cancel != nil {
		a.cancel()
	}
}

// burst creates every node, its pod and its token at once and waits for them all (the
// creates' phase), then starts every agent at once and waits until every node is verified
// (or its agent gone without), or scaleTimeout is up, then until every agent returned (the
// agents' phase); it reads the API server's metrics, the CPU times, the benchmark's RSS and
// open files before, between and after the phases.
func (r *scaleRun) burst(ctx context.Context, s *section, profile string) error {
	var err error
	if r.before, err = scrapeAPIServer(ctx, r.admin); err != nil {
		return err
	}
	r.cpuBefore, r.selfBefore = childCPU(), selfCPU()
	rssCtx, stopRSS := context.WithCancel(ctx)
	defer stopRSS()
	benchRSS := sampleRSS(rssCtx, 250*time.Millisecond)
	profileDone := profileAPIServer(ctx, r.admin, profile)
	r.openFilesLimit = raiseOpenFiles()

	// The creates' phase: what the provisioner, the DaemonSet controller and the kubelet
	// ask of the API server for each node, with no agent running.
	r.start = time.Now()
	var creates sync.WaitGroup
	for _, name := range r.names {
		a := r.agents[name]
		creates.Go(func() {
			a.created = time.Now()
			if a.token, a.err = register(ctx, r.fast, a, r.run); a.err != nil {
				close(a.done)
			}
		})
	}
	creates.Wait()
	r.creates = time.Since(r.start)
	time.Sleep(createsAftermath)
	if r.mid, err = scrapeAPIServer(ctx, r.admin); err != nil {
		return err
	}
	r.cpuMid, r.selfMid = childCPU(), selfCPU()

	// The agents' phase: every agent starts at once on its node, pod and token, or at
	// r.pace a second, as the DaemonSet controller would create their pods.
	r.agentsStart = time.Now()
	var wg sync.WaitGroup
	for i, name := range r.names {
		a := r.agents[name]
		if a.token == "" {
			continue
		}
		if r.pace > 0 {
			at := r.agentsStart.Add(time.Duration(float64(i) / r.pace * float64(time.Second)))
			select {
			case <-ctx.Done():
			case <-time.After(time.Until(at)):
			}
		}
		agentCtx, cancel := context.WithCancel(ctx)
		r.cancelMu.Lock()
		a.cancel = cancel
		r.cancelMu.Unlock()
		wg.Go(func() {
			defer close(a.done)
			defer cancel()
			a.err = runAgent(agentCtx, r.cp.APIServerURL(), r.cp.CAFile(), r.base, r.settle, a, &r.running)
		})
	}

	// Every node verified (or its agent gone without), or the time is up.
	deadline, cancelWait := context.WithTimeout(ctx, scaleTimeout)
	for _, name := range r.names {
		waitCtx, stop := context.WithCancel(deadline)
		go func() {
			select {
			case <-r.agents[name].done:
				stop()
			case <-waitCtx.Done():
			}
		}()
		_, _ = r.nw.wait(waitCtx, name)
		stop()
		if deadline.Err() != nil {
			break
		}
	}
	cancelWait()
	r.allVerified = time.Since(r.agentsStart) // replaced by the last label's time when every node was seen verified
	r.cancelMu.Lock()
	for _, a := range r.agents {
		if a.cancel != nil {
			a.cancel() // the rest, on a timeout
		}
	}
	r.cancelMu.Unlock()
	wg.Wait()
	r.agentsDone = time.Since(r.agentsStart)

	// Watches are counted when they end: give the API server a moment to record the last.
	time.Sleep(time.Second)
	if r.after, err = scrapeAPIServer(ctx, r.admin); err != nil {
		return err
	}
	r.cpuAfter, r.selfAfter = childCPU(), selfCPU()
	stopRSS()
	r.peakRSS, r.peakFiles = benchRSS()
	if r.profile, err = profileDone(); err != nil {
		s.note("No CPU profile of the API server: %v", err)
	}
	return nil
}

// collect reads each node's times off the watch and each agent's own report off its log.
func (r *scaleRun) collect(s *section) {
	for _, name := range r.names {
		a := r.agents[name]
		_, labelled, released := r.nw.times(name)
		if !released {
			s.Failures++
			err := a.err
			if err == nil {
				err = fmt.Errorf("never seen verified; last lines of its log:\n%s", lastLines(a.log.Bytes(), 3))
			}
			if len(r.errs) < 5 {
				r.errs = append(r.errs, fmt.Sprintf("%s: %v", name, err))
			}
			continue
		}
		r.toVerified = append(r.toVerified, labelled.Sub(a.created))
		r.fromAgent = append(r.fromAgent, labelled.Sub(a.agentStarted))
		v, err := parseVerified(a.log.Bytes())
		if err == nil && a.err == nil {
			r.own.add(v)
			r.reported[name] = true
			continue
		}
		// Released, but the agent did not report it.
		r.notReported++
		if len(r.unreported) < 3 {
			r.unreported = append(r.unreported, fmt.Sprintf("%s (run error: %v), last lines of its log:\n\n```\n%s\n```", name, a.err, lastLines(a.log.Bytes(), 8)))
		}
	}
	r.verified = r.nodes - s.Failures
	var lastLabel time.Duration
	for _, name := range r.names {
		if _, at, ok := r.nw.times(name); ok {
			lastLabel = max(lastLabel, at.Sub(r.agentsStart))
		}
	}
	if s.Failures == 0 {
		r.allVerified = lastLabel
	}
	for _, name := range r.names {
		a := r.agents[name]
		if !a.agentStarted.IsZero() {
			r.lastStart = max(r.lastStart, a.agentStarted.Sub(r.agentsStart))
		}
		// An agent that could not open a file or a connection fails for the benchmark's
		// limits, not for anything of nodeready's or the cluster's.
		if (a.err != nil && strings.Contains(a.err.Error(), tooManyFiles)) || bytes.Contains(a.log.Bytes(), []byte(tooManyFiles)) {
			r.lostToLimits = append(r.lostToLimits, name)
		}
	}
}

// tooManyFiles is how EMFILE reads in an error: the process reached its open files limit.
const tooManyFiles = "too many open files"

// reportTimes: how many nodes were released, the creates' time and what the agents added to
// it, and the agents' own phases.
func (r *scaleRun) reportTimes(s *section) {
	s.goal("nodes released (label seen, taint gone) / not released", fmt.Sprintf("%d / %d", r.verified, s.Failures), "0 not released", s.Failures == 0)
	s.goal("agents that released their node but did not report it (no \"Verified node\")", fmt.Sprint(r.notReported), "0", r.notReported == 0)
	s.goal("agents lost to the benchmark's own open files limit (\"too many open files\")", lostLine(r.lostToLimits), "0", len(r.lostToLimits) == 0)
	s.add("benchmark process open files (peak, of its limit)", fmt.Sprintf("%d of %d (%.1f per agent)", r.peakFiles, r.openFilesLimit,
		float64(r.peakFiles)/float64(max(r.nodes, 1))))
	var dials, most int
	dist := map[int]int{}
	for _, a := range r.agents {
		n := int(a.dials.Load())
		dials, most = dials+n, max(most, n)
		dist[n]++
	}
	parts := []string{}
	for _, n := range slices.Sorted(maps.Keys(dist)) {
		parts = append(parts, fmt.Sprintf("%d: %d agents", n, dist[n]))
	}
	s.add("agents' connections to the API server (TLS handshakes; per agent: mean, by count)", fmt.Sprintf("%.2f (%s)",
		float64(dials)/float64(max(r.nodes, 1)), strings.Join(parts, ", ")))
	s.add("creates without agents: first node created to last token (nodes, pods, tokens)", secs(r.creates))
	added := "not all: " + secs(r.allVerified) + " waited"
	if s.Failures == 0 {
		added = secs(r.allVerified)
	}
	ratio := r.allVerified.Seconds() / max(r.creates.Seconds(), 1e-9)
	from := "agents started (all at once)"
	if r.pace > 0 {
		from = fmt.Sprintf("first agent started (then %g a second)", r.pace)
	}
	s.add("nodeready's added time: "+from+" to last label seen, and as a ratio of the creates' time",
		fmt.Sprintf("%s, ×%.2f (the burst with agents: %s, ×%.2f the creates alone)", added, ratio, secs(r.creates+r.allVerified), 1+ratio))
	s.add("per node: agent start to released (label seen)", r.fromAgent.summary(true))
	s.add("per node: node created to released (the creates' phase included)", r.toVerified.summary(true))
	s.add("time until every agent returned (incl. settle window)", secs(r.agentsDone))
	s.add("agents started (last agent.New after the phase's start)", secs(r.lastStart))
	s.add("agents running at once (peak)", fmt.Sprint(r.running.peak.Load()))
	r.own.rows(s, "agent: ")
}

// lostLine names the agents lost to the benchmark's limits, a few of them.
func lostLine(names []string) string {
	if len(names) == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%s)", len(names), strings.Join(names[:min(len(names), 3)], ", "))
}

// reportRequests: all agents' requests; and the fewest one agent needed to release its node
// and report it (the success path: first round passed, nothing retried), with how many
// agents needed exactly that many; and what the API server served.
func (r *scaleRun) reportRequests(s *section) {
	all := map[string]int{}
	var fewest map[string]int
	atFewest := 0
	for _, name := range r.names {
		counts := r.agents[name].requests.snapshot()
		n := 0
		for k, v := range counts {
			all[k] += v
			n += v
		}
		if !r.reported[name] {
			continue
		}
		switch {
		case fewest == nil || n < r.fewestTotal:
			fewest, r.fewestTotal, atFewest = counts, n, 1
		case n == r.fewestTotal:
			atFewest++
		}
	}
	agentReqs := toFloat(all)
	r.perNode = total(agentReqs) / float64(max(r.verified, 1))
	nodeReqs := 0.0
	for k, v := range agentReqs {
		if strings.Contains(k, " nodes") {
			nodeReqs += v
		}
	}
	s.goal("agent API requests on the success path (fewest of one agent), what each is for", fmt.Sprintf("%d: %s (%d of %d agents)", r.fewestTotal,
		purposes(fewest), atFewest, len(r.reported)), fmt.Sprintf("<= %d", successPathGoal), r.fewestTotal <= successPathGoal)
	// The fleet's evidence is read only when a failure action is due: never on the way to
	// a release, retries included.
	s.goal("agent LISTs of nodes (the fleet's evidence read): on the success path / in the whole run",
		fmt.Sprintf("%d / %d", countsFor(fewest, evidenceRead), countsFor(all, evidenceRead)), "0 / 0",
		countsFor(fewest, evidenceRead) == 0 && countsFor(all, evidenceRead) == 0)
	beyond := r.fewestTotal - sumOf(fewest, checkRequests)
	s.goal("of which beyond the checks' own (GET /readyz, LIST endpointslices)", fmt.Sprint(beyond),
		fmt.Sprintf("<= %d", releaseRequestGoal), beyond <= releaseRequestGoal)
	s.add("of which the release itself (GET nodes, PATCH nodes)", fmt.Sprint(fewest["GET nodes"]+fewest["PATCH nodes"]))
	s.add("agent API requests per node (mean, with retries; client-side count), what each is for", fmt.Sprintf("%.2f: %s", r.perNode,
		meanPurposes(agentReqs, r.verified)))
	s.add("agent requests per node on nodes, nodes/status", fmt.Sprintf("%.2f", nodeReqs/float64(max(r.verified, 1))))
	r.server = requestDelta(r.before, r.after)
	s.add("API server requests per node (all clients; the benchmark's own are 3: node, pod, token)", fmt.Sprintf("%.2f", total(r.server)/float64(r.nodes)))
	r.createsReqs, r.agentsReqs = total(requestDelta(r.before, r.mid)), total(requestDelta(r.mid, r.after))
	s.add("API server requests per node by phase: the creates' / the agents' (all clients in each)", fmt.Sprintf("%.2f / %.2f",
		r.createsReqs/float64(r.nodes), r.agentsReqs/float64(r.nodes)))
	cpu := func(from, to metricSet) float64 {
		return to.sum("process_cpu_seconds_total") - from.sum("process_cpu_seconds_total")
	}
	r.apiCPU, r.createsCPU, r.agentsCPU = cpu(r.before, r.after), cpu(r.before, r.mid), cpu(r.mid, r.after)
	s.add("kube-apiserver CPU (process_cpu_seconds_total delta)", fmt.Sprintf("%.1f s (%.1f ms per node)", r.apiCPU, r.apiCPU*1000/float64(r.nodes)))
	s.add("kube-apiserver CPU per node by phase: the creates' / nodeready's (the agents' phase)", fmt.Sprintf(
		"%.1f ms / %.1f ms (nodeready ×%.2f the creates'; %.2f / %.2f cores over the %s / %s of each phase)",
		r.createsCPU*1000/float64(r.nodes), r.agentsCPU*1000/float64(r.nodes), r.agentsCPU/max(r.createsCPU, 1e-9),
		r.createsCPU/max((r.creates+createsAftermath).Seconds(), 1e-9), r.agentsCPU/max(r.agentsDone.Seconds()+1, 1e-9),
		secs(r.creates+createsAftermath), secs(r.agentsDone+time.Second)))
	s.add(fmt.Sprintf("at the DaemonSet controller's pace in a cluster (kube-controller-manager --kube-api-qps %d: agent pods created %d a second)", controllerQPS, controllerQPS),
		fmt.Sprintf("the %d pods take %s; nodeready's API server CPU then %.2f cores (%d × %.1f ms a second)", r.nodes,
			secs(time.Duration(r.nodes/controllerQPS)*time.Second), controllerQPS*r.agentsCPU/float64(r.nodes), controllerQPS,
			r.agentsCPU*1000/float64(r.nodes)))
	s.add("kube-apiserver RSS after", mib(r.after.sum("process_resident_memory_bytes")))
	r.agentReqs = agentReqs
}

// reportCPU: what the control plane and this process (agents and benchmark) spent.
func (r *scaleRun) reportCPU(s *section) {
	cpuLine := []string{}
	for _, k := range slices.Sorted(maps.Keys(r.cpuAfter)) {
		if d := r.cpuAfter[k] - r.cpuBefore[k]; d > 0 {
			cpuLine = append(cpuLine, fmt.Sprintf("%s %.1f s", k, d.Seconds()))
		}
	}
	s.add("control plane CPU (/proc, utime+stime)", strings.Join(cpuLine, ", "))
	r.benchCPU = (r.selfAfter - r.selfBefore).Seconds()
	agentsCPU := (r.selfAfter - r.selfMid).Seconds()
	s.add("in-process agents + benchmark CPU (getrusage)", fmt.Sprintf("%.1f s (%.1f ms per node); of which the agents' phase %.1f s (%.1f ms per node; %.2f cores)",
		r.benchCPU, r.benchCPU*1000/float64(r.nodes), agentsCPU, agentsCPU*1000/float64(r.nodes), agentsCPU/max(r.agentsDone.Seconds(), 1e-9)))
	s.add("benchmark process peak RSS (in-process agents, their clients and connections)", mib(float64(r.peakRSS)))
}

// reportNotes says what the run is and is not.
func (r *scaleRun) reportNotes(s *section) {
	start := "every agent starts at once"
	if r.pace > 0 {
		start = fmt.Sprintf("the agents start %g a second", r.pace)
	}
	s.note("The agents run in this process (`agent.New` and `Run` with the installed configuration, as `main` does), each "+
		"with its own client, bearer token and TLS connection, and a token bound to its own pod, so the admission policy "+
		"applies as in a cluster. Agent processes would add what the footprint section shows per process (the Go "+
		"runtime's start and the binary's pages) to the same two cores; in one process the agents share the runtime. The "+
		"cores are shared: the control plane's CPU and the benchmark's together show how near the run came to the "+
		"machine's two. The burst runs in two phases on the same control plane: first the benchmark creates every node, its "+
		"agent pod and a token bound to the pod (the provisioner's, the DaemonSet controller's and the kubelet's part), all "+
		"at once and unthrottled, with no agent running; then %s. The first phase is the creates' "+
		"time and API server CPU without nodeready, the second what nodeready adds to them, for the same nodes, pods and "+
		"tokens; agents that all start in the same instant are its worst case. An agent's context ends when its node is "+
		"seen verified, as the SIGTERM of the pod's deletion would. In a cluster the DaemonSet controller creates the agent "+
		"pods, at most kube-controller-manager's --kube-api-qps a second (20 by default: 5000 pods take 250 s), so there the "+
		"agents start 20 a second, not at once, and nodeready's share of the API server is its CPU per node times 20 a second.", start)
	r.requestNotes(s)
}

// requestNotes tables the agents' requests, the API server's, and its mean time per request.
func (r *scaleRun) requestNotes(s *section) {
	var b strings.Builder
	fmt.Fprintf(&b, "Agent requests of the %s run, counted in each agent's client (every attempt, with its status when not 2xx):\n\n", r.title)
	renderCounts(&b, r.agentReqs, max(r.verified, 1))
	fmt.Fprintf(&b, "\nEvery request the API server served during the %s run (`apiserver_request_total` delta), all clients: "+
		"the agents', the benchmark's (POST nodes, pods and serviceaccounts/token per node, standing in for the provisioner, the DaemonSet "+
		"controller and the kubelet; one WATCH of nodes), and the controllers' and scheduler's:\n\n", r.title)
	renderCounts(&b, r.server, r.nodes)
	durSum := seriesDelta(r.before, r.after, "apiserver_request_duration_seconds_sum")
	durCount := seriesDelta(r.before, r.after, "apiserver_request_duration_seconds_count")
	fmt.Fprintf(&b, "\nThe API server's mean time per request (`apiserver_request_duration_seconds`, from the request's arrival, "+
		"its queueing in API Priority and Fairness included; watches left out: they last as long as their client keeps them), "+
		"for the requests it served at least once per ten nodes:\n\n| request | mean |\n| --- | --- |\n")
	for _, k := range slices.Sorted(maps.Keys(durCount)) {
		if n := durCount[k]; n >= float64(r.nodes)/10 && !strings.HasPrefix(k, "WATCH") {
			fmt.Fprintf(&b, "| %s | %s |\n", k, ms(time.Duration(durSum[k]/n*float64(time.Second))))
		}
	}
	s.Notes = append(s.Notes, b.String())
}

// reportEvents: how many released nodes have a Verified Event, with examples of those that
// have none.
func (r *scaleRun) reportEvents(ctx context.Context, s *section, res *scaleResult) {
	res.events = -1
	seen, err := verifiedEventNodes(ctx, r.admin, r.names)
	if err != nil {
		return
	}
	n := len(seen)
	s.verifiedEventsGoal(n, r.nodes)
	res.events = n
	var missing []string
	for _, name := range r.names {
		if _, _, released := r.nw.times(name); released && !seen[name] && len(missing) < 3 {
			missing = append(missing, fmt.Sprintf("- %s, its log's lines on Events:\n\n```\n%s\n```", name,
				linesWith(r.agents[name].log.Bytes(), "vent", 3)))
		}
	}
	if len(missing) > 0 {
		s.note("%d released nodes have no Verified Event. For example:", r.verified-n)
		s.Notes = append(s.Notes, missing...)
	}
}

// reportAgreement: the run's nodes as a user finds them at its end, once every agent has
// returned: a node labelled verified whose condition says otherwise tells two stories.
func (r *scaleRun) reportAgreement(ctx context.Context, s *section) {
	list, err := r.admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: benchLabel + "=" + r.run})
	if err != nil {
		s.note("Could not read the nodes at the end: %v", err)
		return
	}
	var labelled int
	var disagree []string
	for _, n := range list.Items {
		if n.Labels[wellknown.VerifiedLabel] != "true" {
			continue
		}
		labelled++
		cond := corev1.NodeCondition{Reason: "none"}
		for _, c := range n.Status.Conditions {
			if c.Type == wellknown.ConditionType {
				cond = c
			}
		}
		if cond.Status != corev1.ConditionTrue || cond.Reason != string(wellknown.Verified) {
			disagree = append(disagree, fmt.Sprintf("%s (%s %s)", n.Name, cond.Status, cond.Reason))
		}
	}
	s.goal("nodes labelled verified at the end whose condition says otherwise", fmt.Sprintf("%s of %d", lostLine(disagree), labelled),
		"0", len(disagree) == 0)
	for _, d := range disagree[:min(len(disagree), 3)] {
		name, _, _ := strings.Cut(d, " ")
		if a := r.agents[name]; a != nil {
			s.note("Labelled verified with another condition: %s, the last lines of its agent's log:\n\n```\n%s\n```", d,
				lastLines(a.log.Bytes(), 8))
		}
	}
}

// reportFairness: the requests API Priority and Fairness rejected, and how long the agents'
// requests queued there against how long they ran: queueing with CPU to spare means the
// priority level's seats, not the machine, set the pace.
func (r *scaleRun) reportFairness(s *section, res *scaleResult) {
	before, after := r.before, r.after
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
	res.rejected = rejected
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
}

// result fills in what the comparison of scale runs shows.
func (r *scaleRun) result(s *section, res *scaleResult) {
	res.allVerified, res.complete = r.allVerified, s.Failures == 0
	res.p50, res.p99 = r.toVerified.pct(50), r.toVerified.pct(99)
	res.successPath, res.meanRequests = r.fewestTotal, r.perNode
	res.creates, res.fromAgentP50, res.fromAgentP99 = r.creates, r.fromAgent.pct(50), r.fromAgent.pct(99)
	res.createsCPUPerNode, res.agentsCPUPerNode = r.createsCPU/float64(r.nodes), r.agentsCPU/float64(r.nodes)
	res.lost, res.peakFiles = len(r.lostToLimits), r.peakFiles
	res.serverPerNode, res.apiCPUPerNode = total(r.server)/float64(r.nodes), r.apiCPU/float64(r.nodes)
	res.notReported = r.notReported
	res.benchCPU, res.peakRunning = r.benchCPU, r.running.peak.Load()
	// Both phases: the creates are admitted too.
	res.admission = newPolicyCost(r.before, r.after, r.creates+createsAftermath+r.allVerified)
}

// reportFailures names the nodes not released and the agents that did not report a release.
func (r *scaleRun) reportFailures(s *section) {
	for _, e := range r.errs {
		s.note("Not released: %s", e)
	}
	if r.notReported > 0 {
		s.note("%d agents released their node (the label was seen, in the same write as the taint's removal) but ended without "+
			"a `Verified node` line; their own phase times are left out above. For example:", r.notReported)
		for _, u := range r.unreported {
			s.note("- %s", u)
		}
	}
}

// scaleResult is what the comparison of scale runs shows.
type scaleResult struct {
	settle                      time.Duration
	pace                        float64 // agents started a second; 0: all at once
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
	admission                   policyCost    // what admission cost the API server during the burst
	creates                     time.Duration // the creates' phase; allVerified is the agents' after it
	fromAgentP50, fromAgentP99  time.Duration // agent start to released
	createsCPUPerNode           float64       // kube-apiserver's, seconds, in the creates' phase
	agentsCPUPerNode            float64       // and in the agents'
	lost                        int           // agents lost to the benchmark's open files limit
	peakFiles                   int64
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
		s.add(fmt.Sprintf("%d nodes, SETTLE_TIME=%s, agents started %s", r.nodes, r.settle, scaleVariant{pace: r.pace}.agentsStart()), fmt.Sprintf(
			"creates %s, nodeready's added time %s (×%.2f); agent start to released p50 %s, p99 %s; success path %d requests, "+
				"mean %.2f per node with retries; API server %.2f requests and %.1f ms CPU per node (the creates' %.1f ms, nodeready's %.1f ms), "+
				"%.2f 429s per node; %d unreported, %d lost to open files (peak %d); Verified Events on %d of %d nodes",
			secs(r.creates), all, r.allVerified.Seconds()/max(r.creates.Seconds(), 1e-9), secs(r.fromAgentP50), secs(r.fromAgentP99),
			r.successPath, r.meanRequests, r.serverPerNode, r.apiCPUPerNode*1000, r.createsCPUPerNode*1000, r.agentsCPUPerNode*1000,
			r.rejected/float64(r.nodes), r.notReported, r.lost, r.peakFiles, r.events, r.nodes))
	}
	// Sizes are compared among runs that differ in nothing else: SETTLE_TIME and pace alike.
	bySettle := map[time.Duration][]*scaleResult{}
	for _, r := range results {
		if r.pace == 0 {
			bySettle[r.settle] = append(bySettle[r.settle], r)
		}
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
	token, err := register(ctx, fast, a, run)
	if err != nil {
		return err
	}
	a.token = token
	return runAgent(agentCtx, server, caFile, base, settle, a, running)
}

// register creates a's node and its pod and returns a token bound to the pod, as the
// provisioner, the DaemonSet controller and the kubelet do for an agent pod.
func register(ctx context.Context, fast kubernetes.Interface, a *inProcessAgent, run string) (string, error) {
	a.created = time.Now()
	node := newNode(a.node, run)
	if _, err := provisioned(func() (*corev1.Node, error) { return fast.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}) },
		func() (*corev1.Node, error) { return fast.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{}) }); err != nil {
		return "", fmt.Errorf("create node: %w", err)
	}
	return agentToken(ctx, fast, a.node, run)
}

// runAgent runs an agent for a's node, with a's token, in this process until agentCtx ends
// (the node is verified) and its release is complete.
func runAgent(agentCtx context.Context, server, caFile string, base config.Config, settle time.Duration, a *inProcessAgent, running *gauge) error {
	// A connection of its own, as each agent pod has: a custom Dial keeps client-go from
	// sharing one cached transport among all clients with the same TLS settings.
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	clients, err := wiring.NewClients(&rest.Config{
		Host:            server,
		TLSClientConfig: rest.TLSClientConfig{CAFile: caFile},
		BearerToken:     a.token,
		UserAgent:       "nodeready/bench",
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			a.dials.Add(1)
			return dialer.DialContext(ctx, network, addr)
		},
		WrapTransport: a.requests.wrap,
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

// writeAgentLogs writes each agent's log into dir, as <node>.log.
func (r *scaleRun) writeAgentLogs(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, name := range r.names {
		a := r.agents[name]
		a.log.mu.Lock()
		err := os.WriteFile(filepath.Join(dir, name+".log"), a.log.buf.Bytes(), 0o644)
		a.log.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}
