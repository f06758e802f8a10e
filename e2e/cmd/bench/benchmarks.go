package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// benchmark is a row of the table main runs: the names -only selects it by, and what it runs.
type benchmark struct {
	names []string
	run   func(ctx context.Context, b *bench) []*section
}

// benchmarks run in this order. daemonset, overhead and latency share one control plane.
var benchmarks = []benchmark{
	{[]string{"concurrency"}, runConcurrency},
	{[]string{"daemonset", "overhead", "latency"}, clusterBenchmarks},
	{[]string{"scale"}, runScale},
	{[]string{"sharedfault"}, runSharedFault},
	{[]string{"realnode"}, runRealNode},
	{[]string{"joins"}, runJoins},
	{[]string{"joins-checks"}, runJoinsChecks},
	{[]string{"policies"}, runPolicies},
}

// benchmarkNames are the names -only takes, in the order they run.
func benchmarkNames() []string {
	var names []string
	for _, bm := range benchmarks {
		names = append(names, bm.names...)
	}
	return names
}

// bench is what every benchmark is given: the options, the machine it runs on, and the
// progress log.
type bench struct {
	o    options
	m    *machine
	logf func(format string, args ...any)
}

// want reports whether -only selects the benchmark name.
func (b *bench) want(name string) bool { return slices.Contains(b.o.only, name) }

func runConcurrency(ctx context.Context, b *bench) []*section {
	b.logf("concurrency: %d rounds of %d checks of %s", b.o.rounds, concurrentChecks, ms(checkDelay))
	repo := ""
	if b.o.goBench {
		repo = b.o.repo
	}
	return []*section{benchConcurrency(ctx, b.o.rounds, repo)}
}

// runScale runs a scale run per node count and SETTLE_TIME, each on a control plane of its
// own, and compares them when there is more than one.
func runScale(ctx context.Context, b *bench) []*section {
	var sections []*section
	var results []*scaleResult
	run := func(nodes int, settle time.Duration, pace float64) {
		if ctx.Err() != nil {
			return
		}
		s, r := scaleBenchmark(ctx, b.o, b.m, nodes, settle, b.logf, scaleVariant{pace: pace})
		sections = append(sections, s)
		if r != nil {
			results = append(results, r)
		}
	}
	for _, nodes := range b.o.nodes {
		for _, settle := range b.o.settles {
			run(nodes, settle, b.o.pace)
		}
	}
	if !b.o.paceSet {
		// The worst case above, every agent at once; then the largest burst as a cluster
		// starts its agents, at the DaemonSet controller's pace.
		run(slices.Max(b.o.nodes), b.o.settles[0], controllerQPS)
	}
	if len(results) > 1 {
		sections = append(sections, compareScale(results))
	}
	return sections
}

func runRealNode(ctx context.Context, b *bench) []*section {
	if ctx.Err() != nil {
		return nil
	}
	b.logf("realnode: a new node on a real kubelet, containerd and runc")
	return []*section{benchRealNode(ctx, b.o, b.logf)}
}

// runJoins runs the joins benchmark twice: with the DaemonSet as shipped (tolerations listed, so
// that its pod is created once the node is Ready), and tolerating every taint, as
// kustomize/components/tolerate-all and the chart's tolerateAll install it.
func runJoins(ctx context.Context, b *bench) []*section {
	if ctx.Err() != nil {
		return nil
	}
	b.logf("joins: %d real nodes joining a running cluster of %d", joinsCount, joinsRunning)
	sections := []*section{benchJoins(ctx, b.o, b.logf, nil, nil)}
	if ctx.Err() == nil {
		b.logf("joins: the same, the agent pod tolerating every taint")
		sections = append(sections, benchJoins(ctx, b.o, b.logf, tolerateAll, nil))
	}
	return sections
}

// runJoinsChecks runs the joins once per joinsCheckVariants, one cluster each: what clock and
// networkpolicy add to node Ready → released.
func runJoinsChecks(ctx context.Context, b *bench) []*section {
	var sections []*section
	for _, v := range joinsCheckVariants {
		if ctx.Err() != nil {
			break
		}
		b.logf("joins: %s", v.title)
		// Each variant's own load: others may share the machine, and the variants are compared.
		start := loadavg()
		s := benchJoins(ctx, b.o, b.logf, nil, v)
		s.Notes = append(s.Notes, fmt.Sprintf("Load average %s at this run's start, %s at its end (2 cores).", start, loadavg()))
		sections = append(sections, s)
	}
	return sections
}

// tolerateAll: every taint, node.kubernetes.io/not-ready:NoSchedule among them.
var tolerateAll = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
