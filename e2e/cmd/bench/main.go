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
//	go run ./cmd/bench -only sharedfault           # a fault shared by 1000 joining nodes
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/nodeready/nodeready/e2e/framework/controlplane"
	"github.com/nodeready/nodeready/e2e/framework/harness"
	"github.com/nodeready/nodeready/internal/config"
)

type options struct {
	out       string
	only      []string
	quick     bool
	runs      int
	latRuns   int
	nodes     sizeList
	nodesSet  bool // -nodes given (or -quick): the shared-fault runs take its sizes too
	dsNodes   int
	rounds    int
	settles   []time.Duration
	pace      float64
	paceSet   bool // -pace given: the scale runs start their agents at that pace only
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
	logf("load average at start: %s (%d cores); open files limit %d", m.LoadStart, m.Cores, raiseOpenFiles())

	b := &bench{o: o, m: &m, logf: logf}
	var sections []*section
	for _, bm := range benchmarks {
		if slices.ContainsFunc(bm.names, b.want) {
			sections = append(sections, bm.run(ctx, b)...)
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
	only := fs.String("only", strings.Join(benchmarkNames(), ","), "benchmarks to run, comma-separated: "+strings.Join(benchmarkNames(), ", ")+" (overhead includes the footprint)")
	fs.BoolVar(&o.quick, "quick", false, "smaller sizes for a quick run: -runs 15 -nodes 100 -ds-nodes 10 -rounds 5")
	fs.IntVar(&o.runs, "runs", 50, "overhead: agent processes, one at a time")
	fs.IntVar(&o.latRuns, "latency-runs", 10, "latency: agent processes, one at a time, each on a fresh node")
	o.nodes = slices.Clone(defaultSizes)
	fs.Var(&o.nodes, "nodes", "scale, sharedfault: node counts, comma-separated: a run per count (and SETTLE_TIME) of that many nodes registered at once, each verified by an in-process agent (sharedfault: 1000 unless set)")
	fs.IntVar(&o.dsNodes, "ds-nodes", 50, "daemonset: nodes registered at once through the simulated kubelet")
	fs.IntVar(&o.rounds, "rounds", 20, "concurrency: rounds of checks")
	settles := fs.String("settle", shippedSettleTime(), "scale: SETTLE_TIME of each scale run, comma-separated (default: as shipped); each run gets a fresh control plane")
	fs.Float64Var(&o.pace, "pace", 0, "scale: start the agents this many a second, as the DaemonSet controller creates their pods (kube-controller-manager's default --kube-api-qps is 20); 0: all at once (default: all at once, then the largest size again 20 a second)")
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
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	o.nodesSet = set["nodes"] || o.quick
	o.paceSet = set["pace"]
	if o.quick {
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
		if !slices.Contains(benchmarkNames(), name) {
			return o, fmt.Errorf("-only: unknown benchmark %q: use %s", name, strings.Join(benchmarkNames(), ", "))
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
	if o.pace < 0 {
		return o, errors.New("-pace must not be negative")
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
