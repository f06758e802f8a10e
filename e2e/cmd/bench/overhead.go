package main

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeready/nodeready/e2e/framework/freeport"
	"github.com/nodeready/nodeready/e2e/framework/harness"
)

// Goals of the overhead and footprint benchmarks.
const (
	overheadGoal  = 50 * time.Millisecond
	rssGoalMiB    = 20
	binaryGoalMiB = 20
)

// processRun is one verification by an agent process that the benchmark started itself.
type processRun struct {
	node     string
	started  time.Time // just before fork and exec
	labelled time.Time // the verified label first seen on the node watch
	agent    verifiedLine
	// maxRSS is the process's peak resident set in bytes: VmHWM of /proc/<pid>/status, read
	// until just before the exit. Not wait4's ru_maxrss: for a child started with vfork,
	// as Go starts processes, the kernel folds the parent's peak into it at exec.
	maxRSS int64
	// status is /proc/<pid>/status at the largest resident set seen while polling it
	// every few milliseconds: how the resident set divides into anonymous memory (heap,
	// stacks) and file pages (the binary's text and data, mapped from the page cache).
	status   map[string]int64
	cpu      time.Duration
	exitCode int
	err      error
	finish   func() // waits for the exit and fills in the above
}

// agentEnv is what every agent process gets: the installed nodeready-config, as envFrom
// gives it to the pod, and what the kubelet adds.
type agentEnv struct {
	config      map[string]string
	serviceHost string
	servicePort string
	dns         string // DNS_NAMESERVER
	goMemLimit  string // from the DaemonSet's memory limit, as its resourceFieldRef sets it
	// apiURL and caFile, when set, are the API server the agent's kubeconfig names instead
	// of the control plane's (the latency benchmark's slow proxy).
	apiURL, caFile string
}

func (e agentEnv) forNode(node, kubeconfig string, metricsPort int) []string {
	env := maps.Clone(e.config)
	maps.Copy(env, map[string]string{
		"NODE_NAME":               node,
		"POD_NAME":                "nodeready-" + node,
		"POD_NAMESPACE":           harness.Namespace,
		"KUBECONFIG":              kubeconfig,
		"KUBERNETES_SERVICE_HOST": e.serviceHost,
		"KUBERNETES_SERVICE_PORT": e.servicePort,
		"DNS_NAMESERVER":          e.dns,
		"METRICS_PORT":            strconv.Itoa(metricsPort),
	})
	if e.goMemLimit != "" {
		env["GOMEMLIMIT"] = e.goMemLimit
	}
	list := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		list = append(list, k+"="+env[k])
	}
	return list
}

// overheadSpacing lets one agent's release tail (its condition, its Event) pass before the
// next agent starts, so that runs measure one agent at a time.
const overheadSpacing = 250 * time.Millisecond

// benchOverhead runs the agent binary once per run against its own fresh node, one at a
// time, as the kubelet would start it: the same environment, a token bound to its pod. It
// sends SIGTERM once the node is seen verified, as the DaemonSet's deletion of the pod
// does, and collects the exit status and resource use. The first run warms the page cache
// and is not counted.
func benchOverhead(ctx context.Context, c *harness.Cluster, env agentEnv, bin string, runs int) (*section, *section) {
	s := &section{Title: "overhead"}
	fp := &section{Title: "footprint"}
	fpBinary(fp, bin)

	client := c.Client()
	const run = "overhead"
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	nw, err := watchNodes(watchCtx, client, benchLabel+"="+run, nil)
	if err != nil {
		s.Err = err
		return s, fp
	}
	work, err := os.MkdirTemp("", "nodeready-bench-")
	if err != nil {
		s.Err = err
		return s, fp
	}
	defer os.RemoveAll(work)

	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		results []*processRun
	)
	for i := range runs + 1 {
		if ctx.Err() != nil {
			break
		}
		r := startRun(ctx, client, c, env, nw, bin, work, fmt.Sprintf("overhead-%d", i), run)
		if r.err != nil && r.started.IsZero() {
			s.Err = r.err // setup failed: nothing more would work
			break
		}
		wg.Go(func() {
			finishRun(r)
			mu.Lock()
			if i > 0 {
				results = append(results, r)
			}
			mu.Unlock()
		})
		time.Sleep(overheadSpacing)
	}
	wg.Wait()
	var nodes []string
	for _, r := range results {
		nodes = append(nodes, r.node)
	}
	events, eventsErr := verifiedEvents(ctx, client, nodes)
	cleanup(client, run)

	var (
		ext, extBeyond durations
		own            phases
		rss            []int64
		cpu            durations
		anon, file     []int64
	)
	for _, r := range results {
		if r.err != nil {
			s.Failures++
			s.note("%s: %v", r.node, r.err)
			continue
		}
		ext = append(ext, r.labelled.Sub(r.started))
		extBeyond = append(extBeyond, r.labelled.Sub(r.started)-r.agent.Checks)
		own.add(r.agent)
		rss = append(rss, r.maxRSS)
		if r.status != nil {
			anon = append(anon, r.status["RssAnon"])
			file = append(file, r.status["RssFile"])
		}
		cpu = append(cpu, r.cpu)
	}
	s.add("runs (one agent process at a time; first run not counted)", fmt.Sprintf("%d counted, %d failed", len(ext), s.Failures))
	s.add("external: exec to label seen on a node watch", ext.summary(false))
	s.goal("external, beyond the checks (exec to label, minus checks_seconds)", extBeyond.summary(false),
		"p50 < "+ms(overheadGoal), len(extBeyond) > 0 && extBeyond.pct(50) < overheadGoal)
	own.rows(s, "agent: ")
	s.goal("agent: beyond the checks (start-up + release)", own.overhead.summary(false),
		"p50 < "+ms(overheadGoal), len(own.overhead) > 0 && own.overhead.pct(50) < overheadGoal)
	if eventsErr == nil {
		s.verifiedEventsGoal(events, len(results))
	}
	s.note("Each run registers a fresh node (Ready, startup taint), creates its agent pod bound to it and a pod-bound token, "+
		"then starts `%s` with the environment the kubelet would give it: `nodeready-config` as installed "+
		"(loopback targets; `CHECKS=%s`, `LOG_LEVEL=%s`, `SETTLE_TIME=%s`), `GOMEMLIMIT` from the DaemonSet's memory limit, "+
		"and sends it SIGTERM when the node is seen verified, as the DaemonSet's deletion of the pod does. "+
		"*External* is measured by the benchmark: from just before fork/exec to the verified label arriving on a node watch; "+
		"it includes the Go runtime's start and the watch's delivery. *Agent* figures are the agent's own, "+
		"from its `Verified node` log line, measured from the start of `main`. The checks run at once, so the round's wall "+
		"time is the slowest check; *beyond the checks* is what the agent adds to it.",
		filepath.Base(bin), env.config["CHECKS"], env.config["LOG_LEVEL"], env.config["SETTLE_TIME"])

	if len(rss) > 0 {
		slices.Sort(rss)
		p50, peak := rss[len(rss)/2], rss[len(rss)-1]
		fp.goal("peak RSS per verification (VmHWM just before exit)", fmt.Sprintf("p50 %s, max %s", mib(float64(p50)), mib(float64(peak))),
			fmt.Sprintf("< %d MiB", rssGoalMiB), float64(peak) < rssGoalMiB*(1<<20))
		if len(anon) > 0 {
			fp.add("largest RSS sampled: anonymous (heap, stacks) / file (binary, page cache)",
				fmt.Sprintf("p50 %s / %s", mib(float64(median(anon))), mib(float64(median(file)))))
		}
		fp.add("CPU per verification (utime+stime, whole process life incl. settle)", cpu.summary(false))
		fp.note("Each agent process of the overhead runs is sampled every %.0f ms through /proc/<pid>/status until it exits: "+
			"the peak RSS is the last VmHWM read, the split the sample with the largest VmRSS. Not wait4's ru_maxrss, which for "+
			"a child started with vfork (as Go starts processes) includes the parent's peak. The CPU time is wait4's utime+stime "+
			"of the whole life: exec, release, the settle window, exit on SIGTERM. File pages are the binary's, mapped from "+
			"the page cache: shared between processes running the same binary, and reclaimable. Much of the peak is there "+
			"before any work: the package initialisation maps the binary's pages, as `nodeready --version` shows by itself. "+
			"The agent speaks through internal/kube, typed clients of the nine API group versions it uses, and writes its "+
			"Events itself (internal/report). Before (commit e1fa95f), client-go's clientset, discovery client and Events "+
			"recorder, which register every API group of Kubernetes, made the binary 28.7 MiB (30130338 bytes), the image "+
			"11.1 MiB compressed, the peak RSS p50 26.9 MiB and a joining node's image pull p50 567 ms (BENCH.md of that commit).",
			statusPoll.Seconds()*1000)
	}
	return s, fp
}

// startRun prepares one node and starts its agent, then waits for the node to be seen
// verified and sends SIGTERM. A zero started time means the setup failed.
func startRun(ctx context.Context, client kubernetes.Interface, c *harness.Cluster, env agentEnv, nw *nodeWatch, bin, work, node, run string) *processRun {
	r := &processRun{node: node}
	if _, err := client.CoreV1().Nodes().Create(ctx, newNode(node, run), metav1.CreateOptions{}); err != nil {
		r.err = fmt.Errorf("create node: %w", err)
		return r
	}
	token, err := agentToken(ctx, client, node, run)
	if err != nil {
		r.err = err
		return r
	}
	dir := filepath.Join(work, node)
	if err := os.Mkdir(dir, 0o700); err != nil {
		r.err = err
		return r
	}
	cp := c.ControlPlane()
	server, ca := cp.APIServerURL(), cp.CAFile()
	if env.apiURL != "" {
		server, ca = env.apiURL, env.caFile
	}
	kubeconfig, err := writeKubeconfig(dir, server, ca, token)
	if err != nil {
		r.err = err
		return r
	}
	port, err := freeport.Port()
	if err != nil {
		r.err = err
		return r
	}
	var log bytes.Buffer
	cmd := exec.Command(bin)
	cmd.Env = env.forNode(node, kubeconfig, port)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	r.started = time.Now()
	if err := cmd.Start(); err != nil {
		r.err = fmt.Errorf("start agent: %w", err)
		r.started = time.Time{}
		return r
	}
	exited := make(chan struct{})
	polled := make(chan memory, 1)
	go func() { polled <- pollStatus(cmd.Process.Pid, exited) }()
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	r.labelled, r.err = nw.wait(waitCtx, node)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	r.finish = func() {
		werr := cmd.Wait()
		close(exited)
		mem := <-polled
		r.maxRSS, r.status = mem.hwm, mem.peak
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			r.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
		r.exitCode = cmd.ProcessState.ExitCode()
		if r.err != nil {
			return
		}
		var exitErr *exec.ExitError
		if werr != nil && !errors.As(werr, &exitErr) {
			r.err = werr
			return
		}
		if r.exitCode != 0 {
			r.err = fmt.Errorf("agent exited %d:\n%s", r.exitCode, lastLines(log.Bytes(), 5))
			return
		}
		if r.agent, err = parseVerified(log.Bytes()); err != nil {
			r.err = fmt.Errorf("%w:\n%s", err, lastLines(log.Bytes(), 5))
		}
	}
	return r
}

// statusPoll is how often the memory of an agent process is sampled.
const statusPoll = 5 * time.Millisecond

// memory is what sampling /proc/<pid>/status found.
type memory struct {
	hwm int64 // VmHWM in the last sample before the exit: the peak resident set
	// peak is the sample with the largest VmRSS, to show what the resident set holds.
	peak map[string]int64
}

// pollStatus samples /proc/<pid>/status until the process is gone or exited is closed.
func pollStatus(pid int, exited <-chan struct{}) memory {
	var m memory
	t := time.NewTicker(statusPoll)
	defer t.Stop()
	for {
		st, err := procStatus(pid)
		if err != nil || st["VmHWM"] == 0 { // gone, or a zombie that has released its memory
			return m
		}
		m.hwm = st["VmHWM"]
		if m.peak == nil || st["VmRSS"] > m.peak["VmRSS"] {
			m.peak = st
		}
		select {
		case <-exited:
			return m
		case <-t.C:
		}
	}
}

// finishRun waits for the agent to exit (the settle window holds it a few seconds after
// SIGTERM) and reads what it left.
func finishRun(r *processRun) {
	if r.finish != nil {
		r.finish()
	}
}

// cleanup deletes the pods and nodes of a run.
func cleanup(client kubernetes.Interface, run string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sel := metav1.ListOptions{LabelSelector: benchLabel + "=" + run}
	zero := int64(0)
	_ = client.CoreV1().Pods(harness.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, sel)
	_ = client.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, sel)
}

// fpBinary reports the agent binary's size and how it was built.
func fpBinary(s *section, bin string) {
	st, err := os.Stat(bin)
	if err != nil {
		s.note("agent binary: %v", err)
		return
	}
	desc := ""
	if f, err := elf.Open(bin); err == nil {
		stripped := f.Section(".symtab") == nil
		static := !slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP })
		f.Close()
		desc = fmt.Sprintf("stripped: %v, static: %v", stripped, static)
	}
	if info, err := buildinfo.ReadFile(bin); err == nil {
		desc += ", " + info.GoVersion
		for _, set := range info.Settings {
			if set.Key == "CGO_ENABLED" || set.Key == "-ldflags" || set.Key == "-trimpath" {
				desc += fmt.Sprintf(", %s=%s", set.Key, set.Value)
			}
		}
	}
	s.goal("binary size ("+filepath.Base(bin)+")", fmt.Sprintf("%s (%d bytes)", mib(float64(st.Size())), st.Size()),
		fmt.Sprintf("< %d MiB", binaryGoalMiB), st.Size() < binaryGoalMiB<<20)
	if desc != "" {
		s.add("binary build", desc)
	}
}

func lastLines(b []byte, n int) string {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

func median(v []int64) int64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
