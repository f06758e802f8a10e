// Command bench measures nodeready on a real local control plane (e2e/framework/harness): the
// agent's overhead per verification, its release on a network with 200 ms round trips, the
// concurrency of its checks, how far one API server scales with agents verifying at once, the way
// through the DaemonSet controller and the simulated kubelet, the agent's footprint, and, as root
// on Linux, a new node's critical path on a real node (e2e/framework/realnode). It prints a table
// and, with -out, writes it with the machine it ran on as markdown (BENCH.md).
//
// It measures and reports; it never fails on a time. It exits 1 when a benchmark could not
// run or a verification failed, and 2 on bad flags.
//
//	cd e2e && NODEREADY_BIN=$PWD/../bin/nodeready go run ./cmd/bench -out ../BENCH.md
//	go run ./cmd/bench -quick                      # smaller sizes, about a minute
//	go run ./cmd/bench -only scale -nodes 300      # one benchmark, another size
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/nodeready/nodeready/checks/dnstest"
	"github.com/nodeready/nodeready/e2e/framework/controlplane"
	"github.com/nodeready/nodeready/e2e/framework/harness"
	"github.com/nodeready/nodeready/internal/config"
)

// dnsAnswer is what the agents' DNS server answers for harness.DNSName: the kube-dns
// Service address of a default cluster. The dns check only needs an answer.
var dnsAnswer = netip.MustParseAddr("10.96.0.10")

// benchmarks are the names -only takes, in the order they run.
var benchmarks = []string{"concurrency", "daemonset", "overhead", "latency", "scale", "realnode", "joins"}

type options struct {
	out       string
	only      []string
	quick     bool
	runs      int
	latRuns   int
	nodes     sizeList
	dsNodes   int
	rounds    int
	settles   []time.Duration
	logDir    string
	agent     string
	repo      string
	goBench   bool
	set       map[string]string
	startedAt time.Time
	args      []string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 2
	}
	m := describeMachine()
	m.Kubernetes = controlplane.KubernetesVersion
	// client-go logs through klog: retries and timeouts of a thousand agents under load
	// would drown the progress lines. They go to the log directory when there is one.
	klogOut := io.Discard
	if o.logDir != "" {
		if err := os.MkdirAll(o.logDir, 0o755); err == nil {
			if f, err := os.Create(filepath.Join(o.logDir, "client-go.log")); err == nil {
				defer f.Close()
				klogOut = f
			}
		}
	}
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	_ = klogFlags.Set("logtostderr", "false")
	_ = klogFlags.Set("stderrthreshold", "FATAL")
	klog.SetOutput(klogOut)
	logf := func(format string, a ...any) {
		fmt.Fprintf(stderr, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, a...))
	}
	logf("load average at start: %s (%d cores)", m.LoadStart, m.Cores)

	var sections []*section
	want := func(name string) bool { return slices.Contains(o.only, name) }

	if want("concurrency") {
		logf("concurrency: %d rounds of %d checks of %s", o.rounds, concurrentChecks, ms(checkDelay))
		repo := ""
		if o.goBench {
			repo = o.repo
		}
		sections = append(sections, benchConcurrency(ctx, o.rounds, repo))
	}

	if want("daemonset") || want("overhead") || want("latency") {
		sections = append(sections, clusterBenchmarks(ctx, o, &m, logf)...)
	}

	if want("scale") {
		var results []*scaleResult
		for _, nodes := range o.nodes {
			for _, settle := range o.settles {
				if ctx.Err() != nil {
					break
				}
				s, r := scaleBenchmark(ctx, o, &m, nodes, settle, logf)
				sections = append(sections, s)
				if r != nil {
					results = append(results, r)
				}
			}
		}
		if len(results) > 1 {
			sections = append(sections, compareScale(results))
		}
	}

	if want("realnode") && ctx.Err() == nil {
		logf("realnode: a new node on a real kubelet, containerd and runc")
		sections = append(sections, benchRealNode(ctx, o, logf))
	}
	if want("joins") && ctx.Err() == nil {
		logf("joins: %d real nodes joining a running cluster of %d", joinsCount, joinsRunning)
		sections = append(sections, benchJoins(ctx, o, logf, ""))
		if ctx.Err() == nil {
			logf("joins: the same, the kubelets reading ConfigMaps and Secrets with Get")
			sections = append(sections, benchJoins(ctx, o, logf, "configMapAndSecretChangeDetectionStrategy: Get\n"))
		}
	}

	m.LoadEnd = loadavg()
	failed := false
	for _, s := range sections {
		failed = failed || s.Err != nil || s.Failures > 0
	}
	fmt.Fprintln(stdout)
	printTable(stdout, sections)
	fmt.Fprintf(stdout, "\nmachine: %s, %d cores, %d MiB, %s, Kubernetes %s; load average %s at start, %s at end\n",
		m.CPU, m.Cores, m.MemoryMiB, m.GoVersion, m.Kubernetes, m.LoadStart, m.LoadEnd)
	if o.out != "" {
		if err := writeMarkdown(o.out, o, m, sections); err != nil {
			fmt.Fprintf(stderr, "bench: write %s: %v\n", o.out, err)
			return 1
		}
		logf("wrote %s", o.out)
	}
	if failed || ctx.Err() != nil {
		return 1
	}
	return 0
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	o := options{startedAt: time.Now(), args: args}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.out, "out", "", "write the results as markdown to this file (BENCH.md)")
	only := fs.String("only", strings.Join(benchmarks, ","), "benchmarks to run, comma-separated: "+strings.Join(benchmarks, ", ")+" (overhead includes the footprint)")
	fs.BoolVar(&o.quick, "quick", false, "smaller sizes for a quick run: -runs 15 -nodes 100 -ds-nodes 10 -rounds 5")
	fs.IntVar(&o.runs, "runs", 50, "overhead: agent processes, one at a time")
	fs.IntVar(&o.latRuns, "latency-runs", 10, "latency: agent processes, one at a time, each on a fresh node")
	o.nodes = slices.Clone(defaultSizes)
	fs.Var(&o.nodes, "nodes", "scale: node counts, comma-separated: a run per count (and SETTLE_TIME) of that many nodes registered at once, each verified by an in-process agent")
	fs.IntVar(&o.dsNodes, "ds-nodes", 50, "daemonset: nodes registered at once through the simulated kubelet")
	fs.IntVar(&o.rounds, "rounds", 20, "concurrency: rounds of checks")
	settles := fs.String("settle", shippedSettleTime(), "scale: SETTLE_TIME of each scale run, comma-separated (default: as shipped); each run gets a fresh control plane")
	fs.StringVar(&o.logDir, "logs", "", "keep the control plane, kubelet and agent logs in this directory, and the API server's CPU profile of each scale run")
	fs.BoolVar(&o.goBench, "gotest", true, "concurrency: also run checks.BenchmarkRunAll with go test")
	o.set = map[string]string{}
	fs.Func("set", "KEY=VALUE: change a nodeready-config setting for every agent, such as -set SETTLE_TIME=0s (repeatable; the scale runs take SETTLE_TIME from -settle)", func(v string) error {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return fmt.Errorf("want KEY=VALUE, got %q", v)
		}
		o.set[k] = val
		return nil
	})
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: bench [flags]\n\nMeasures nodeready on a local control plane, prints a table and, with -out, writes it as markdown.\n"+
			"Needs the agent binary ($%s, else bin/nodeready: make build) and the control plane (make control-plane).\n\nFlags:\n", harness.AgentBinaryEnv)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.quick {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for name, v := range map[string]*int{"runs": &o.runs, "ds-nodes": &o.dsNodes, "rounds": &o.rounds} {
			if !set[name] {
				*v = map[string]int{"runs": 15, "ds-nodes": 10, "rounds": 5}[name]
			}
		}
		if !set["nodes"] {
			o.nodes = sizeList{100}
		}
	}
	for name := range strings.SplitSeq(*only, ",") {
		name = strings.TrimSpace(name)
		if name == "footprint" {
			name = "overhead"
		}
		if !slices.Contains(benchmarks, name) {
			return o, fmt.Errorf("-only: unknown benchmark %q: use %s", name, strings.Join(benchmarks, ", "))
		}
		o.only = append(o.only, name)
	}
	for v := range strings.SplitSeq(*settles, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil || d < 0 {
			return o, fmt.Errorf("-settle: %q is not a duration", v)
		}
		o.settles = append(o.settles, d)
	}
	if o.runs < 1 || o.latRuns < 1 || o.dsNodes < 1 || o.rounds < 1 {
		return o, errors.New("-runs, -ds-nodes and -rounds must be at least 1")
	}
	repo, err := harness.FindRepoRoot()
	if err != nil {
		return o, err
	}
	o.repo = repo
	o.agent = os.Getenv(harness.AgentBinaryEnv)
	if o.agent == "" {
		o.agent = filepath.Join(repo, "bin", "nodeready")
	}
	return o, nil
}

// shippedSettings are put back to their values in manifests/02-configmap.yaml over the
// harness's loopback configuration, which shortens them for tests: the agents then log and
// retry as they do in production (debug logging writes a line per check; short check
// timeouts and back-offs multiply the requests of an overloaded API server).
var shippedSettings = []string{"LOG_LEVEL", "RETRY_BACKOFF_BASE", "RETRY_BACKOFF_MAX", "CHECK_TIMEOUT"}

// benchConfig returns the shipped values of shippedSettings.
func benchConfig(repo string) (map[string]string, error) {
	path := filepath.Join(repo, "manifests", "02-configmap.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var cm corev1.ConfigMap
	if err := yaml.Unmarshal(data, &cm); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	out := map[string]string{}
	for _, k := range shippedSettings {
		v, ok := cm.Data[k]
		if !ok {
			return nil, fmt.Errorf("%s has no %s", path, k)
		}
		out[k] = v
	}
	return out, nil
}

// startCluster starts a control plane with nodeready installed.
func startCluster(ctx context.Context, o options, name string, m *machine, logf func(string, ...any)) (*harness.Cluster, error) {
	config, err := benchConfig(o.repo)
	if err != nil {
		return nil, err
	}
	maps.Copy(config, o.set)
	opts := harness.Options{AgentBinary: o.agent, Config: config}
	if o.logDir != "" {
		opts.LogDir = filepath.Join(o.logDir, name)
		if err := os.MkdirAll(opts.LogDir, 0o755); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	c, err := harness.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	if v, err := c.Client().Discovery().ServerVersion(); err == nil {
		m.Kubernetes = v.GitVersion
	}
	logf("%s: control plane up in %s", name, secs(time.Since(start)))
	return c, nil
}

// clusterBenchmarks runs the DaemonSet benchmark, then, with the DaemonSet removed so that
// only the benchmark's own agents run, the latency benchmark and the overhead and footprint
// benchmark.
func clusterBenchmarks(ctx context.Context, o options, m *machine, logf func(string, ...any)) []*section {
	c, err := startCluster(ctx, o, "cluster", m, logf)
	if err != nil {
		return []*section{{Title: "daemonset, overhead", Err: err}}
	}
	defer c.Stop()
	var out []*section
	if slices.Contains(o.only, "daemonset") {
		logf("daemonset: %d nodes at once through the DaemonSet and the simulated kubelet", o.dsNodes)
		out = append(out, benchDaemonSet(ctx, c, o.dsNodes))
	}
	overhead, latency := slices.Contains(o.only, "overhead"), slices.Contains(o.only, "latency")
	if !overhead && !latency || ctx.Err() != nil {
		return out
	}
	env, err := prepareDirect(ctx, c)
	if err != nil {
		return append(out, &section{Title: "overhead", Err: err})
	}
	if latency {
		logf("latency: %d agent processes, one at a time, %s per round trip", o.latRuns, ms(roundTrip))
		out = append(out, benchLatency(ctx, c, env, o.agent, o.latRuns))
	}
	if !overhead || ctx.Err() != nil {
		return out
	}
	dns, err := dnstest.NewServer(map[string][]netip.Addr{harness.DNSName: {dnsAnswer}})
	if err != nil {
		return append(out, &section{Title: "overhead", Err: err})
	}
	defer dns.Close()
	env.dns = dns.Addr()
	logf("overhead: %d agent processes, one at a time", o.runs)
	s, fp := benchOverhead(ctx, c, env, o.agent, o.runs)
	return append(out, s, fp)
}

// prepareDirect removes the DaemonSet, so that the benchmark runs the only agents, and
// returns the environment every agent gets: the installed configuration and the memory
// limit the DaemonSet gives GOMEMLIMIT.
func prepareDirect(ctx context.Context, c *harness.Cluster) (agentEnv, error) {
	var env agentEnv
	ds, err := c.Client().AppsV1().DaemonSets(harness.Namespace).Get(ctx, harness.DaemonSetName, metav1.GetOptions{})
	if err != nil {
		return env, fmt.Errorf("read DaemonSet: %w", err)
	}
	if lim, ok := ds.Spec.Template.Spec.Containers[0].Resources.Limits["memory"]; ok {
		env.goMemLimit = fmt.Sprint(lim.Value())
	}
	if err := removeDaemonSet(ctx, c); err != nil {
		return env, err
	}
	cm, err := c.Client().CoreV1().ConfigMaps(harness.Namespace).Get(ctx, harness.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		return env, fmt.Errorf("read %s: %w", harness.ConfigMapName, err)
	}
	env.config = cm.Data
	env.serviceHost, env.servicePort = c.ControlPlane().APIServerHostPort()
	return env, nil
}

// removeDaemonSet deletes the DaemonSet and waits until it is gone, with its pods.
func removeDaemonSet(ctx context.Context, c *harness.Cluster) error {
	client := c.Client()
	fg := metav1.DeletePropagationForeground
	err := client.AppsV1().DaemonSets(harness.Namespace).Delete(ctx, harness.DaemonSetName, metav1.DeleteOptions{PropagationPolicy: &fg})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete DaemonSet: %w", err)
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.AppsV1().DaemonSets(harness.Namespace).Get(ctx, harness.DaemonSetName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// scaleBenchmark runs one scale run on a control plane of its own, without the DaemonSet.
func scaleBenchmark(ctx context.Context, o options, m *machine, nodes int, settle time.Duration, logf func(string, ...any)) (*section, *scaleResult) {
	name := fmt.Sprintf("scale-%d-settle-%s", nodes, settle)
	c, err := startCluster(ctx, o, name, m, logf)
	if err != nil {
		return &section{Title: name, Err: err}, nil
	}
	defer c.Stop()
	if err := removeDaemonSet(ctx, c); err != nil {
		return &section{Title: name, Err: err}, nil
	}
	dns, err := dnstest.NewServer(map[string][]netip.Addr{harness.DNSName: {dnsAnswer}})
	if err != nil {
		return &section{Title: name, Err: err}, nil
	}
	defer dns.Close()
	base, err := configFromCluster(ctx, c, dns.Addr())
	if err != nil {
		return &section{Title: name, Err: err}, nil
	}
	logf("scale: %d nodes at once, in-process agents, SETTLE_TIME=%s (load average %s)", nodes, settle, loadavg())
	profile := ""
	if o.logDir != "" {
		profile = filepath.Join(o.logDir, name, "kube-apiserver.cpu.pprof")
	}
	s, r := benchScale(ctx, c, base, nodes, settle, "scale", profile)
	logf("scale: done, %d not released", s.Failures)
	return s, r
}

// shippedSettleTime is SETTLE_TIME as nodeready ships it: the agent's default, which
// manifests/02-configmap.yaml sets too.
func shippedSettleTime() string {
	for _, v := range config.Variables() {
		if v.Name == "SETTLE_TIME" {
			return v.Default
		}
	}
	return ""
}
