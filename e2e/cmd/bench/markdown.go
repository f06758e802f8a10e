package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"time"
)

// writeMarkdown writes the results, the goals and the machine as BENCH.md.
func writeMarkdown(path string, o options, m machine, sections []*section) error {
	var b bytes.Buffer
	fmt.Fprintln(&b, "# Benchmarks")
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "Written by `make bench`, which builds the agent and the control plane and runs")
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "```sh")
	fmt.Fprintf(&b, "cd e2e && NODEREADY_BIN=$PWD/../bin/nodeready go run ./cmd/bench -out ../BENCH.md%s\n", argsSuffix(o.args))
	fmt.Fprintln(&b, "```")
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "`make bench BENCH_FLAGS=-quick` runs smaller sizes; `-only` picks benchmarks ("+strings.Join(benchmarkNames(), ", ")+") and `-runs`, `-nodes`, `-ds-nodes`, `-settle` set sizes (`go run ./cmd/bench -h`). The benchmarks "+
		"measure and report: none fails on a time. Every figure comes from one run on the machine below, with a real etcd, "+
		"kube-apiserver, kube-controller-manager and kube-scheduler on loopback (e2e/framework/harness), all sharing its cores with "+
		"the agents and the benchmark itself.")
	fmt.Fprintln(&b)

	fmt.Fprintln(&b, "## Machine")
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "| | |")
	fmt.Fprintln(&b, "| --- | --- |")
	fmt.Fprintf(&b, "| CPU | %s |\n", m.CPU)
	fmt.Fprintf(&b, "| cores | %d |\n", m.Cores)
	fmt.Fprintf(&b, "| memory | %d MiB |\n", m.MemoryMiB)
	fmt.Fprintf(&b, "| Go | %s |\n", m.GoVersion)
	fmt.Fprintf(&b, "| Kubernetes | %s (etcd, kube-apiserver, kube-controller-manager, kube-scheduler on loopback) |\n", m.Kubernetes)
	fmt.Fprintf(&b, "| date | %s |\n", m.Date.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "| load average (1, 5, 15 min) | %s at start, %s at end |\n", m.LoadStart, m.LoadEnd)
	fmt.Fprintf(&b, "| run time | %s |\n", time.Since(o.startedAt).Round(time.Second))
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "A load average above zero at the start means other work was running on the machine; "+
		"its share of the cores is in every figure below.")
	fmt.Fprintln(&b)

	fmt.Fprintln(&b, "## Goals")
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "| benchmark | metric | value | goal | result |")
	fmt.Fprintln(&b, "| --- | --- | --- | --- | --- |")
	for _, s := range sections {
		for _, r := range s.Rows {
			if r.Goal != "" {
				fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", cell(s.Title), cell(r.Metric), cell(r.Value), cell(r.Goal), r.Status)
			}
		}
		if s.Err != nil {
			fmt.Fprintf(&b, "| %s | did not complete | %s | | |\n", cell(s.Title), cell(oneLine(s.Err.Error())))
		}
	}
	fmt.Fprintln(&b)

	for _, s := range sections {
		fmt.Fprintf(&b, "## %s\n\n", s.Title)
		if s.Err != nil {
			fmt.Fprintf(&b, "Did not complete: `%s`\n\n", oneLine(s.Err.Error()))
		}
		if len(s.Rows) > 0 {
			markdownTable(&b, s.Rows)
			fmt.Fprintln(&b)
		}
		for _, n := range s.Notes {
			fmt.Fprintln(&b, strings.TrimSpace(n))
			fmt.Fprintln(&b)
		}
	}
	return os.WriteFile(path, append(bytes.TrimRight(b.Bytes(), "\n"), '\n'), 0o644)
}

// argsSuffix repeats the flags the run was given, other than -out.
func argsSuffix(args []string) string {
	var kept []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "-out" || a == "--out" {
			i++
			continue
		}
		if strings.HasPrefix(a, "-out=") || strings.HasPrefix(a, "--out=") {
			continue
		}
		kept = append(kept, a)
	}
	if len(kept) == 0 {
		return ""
	}
	return " " + strings.Join(kept, " ")
}
