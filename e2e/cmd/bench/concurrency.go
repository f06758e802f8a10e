package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/nodeready/nodeready/checks"
)

// sleepCheck passes after d, or fails when ctx ends first.
type sleepCheck struct {
	name string
	d    time.Duration
}

var _ checks.Check = sleepCheck{}

func (s sleepCheck) Name() string   { return s.name }
func (s sleepCheck) Target() string { return "-" }
func (s sleepCheck) Run(ctx context.Context) error {
	t := time.NewTimer(s.d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

const (
	concurrentChecks = 5
	checkDelay       = 200 * time.Millisecond
)

// benchConcurrency measures a round of five checks that take 200 ms each through
// checks.RunAll, the agent's own round, in this process; and runs checks.BenchmarkRunAll
// with go test in the main module, when repo is known.
func benchConcurrency(ctx context.Context, rounds int, repo string) *section {
	s := &section{Title: "concurrency"}
	list := make([]checks.Check, concurrentChecks)
	for i := range list {
		list[i] = sleepCheck{name: fmt.Sprintf("sleep%d", i), d: checkDelay}
	}
	var d durations
	for range rounds {
		start := time.Now()
		results := checks.RunAll(ctx, list, 5*time.Second)
		d = append(d, time.Since(start))
		for _, r := range results {
			if !r.Passed() {
				s.Failures++
			}
		}
	}
	p50 := d.pct(50)
	s.goal(fmt.Sprintf("round of %d checks of %s each (checks.RunAll, %d rounds)", concurrentChecks, ms(checkDelay), rounds),
		d.summary(false), fmt.Sprintf("about %s, not %s", ms(checkDelay), ms(concurrentChecks*checkDelay)),
		p50 < checkDelay*3/2)
	s.add("overhead of a round beyond its slowest check", "p50 "+ms(p50-checkDelay))

	if repo == "" {
		return s
	}
	ns, out, err := goBenchRunAll(ctx, repo)
	if err != nil {
		s.note("`go test -run '^$' -bench RunAll ./checks/` failed: %v\n\n```\n%s\n```", err, strings.TrimSpace(out))
		return s
	}
	s.add("checks.BenchmarkRunAll (go test -bench, same round)", ms(time.Duration(ns))+"/op")
	return s
}

// goBenchRunAll runs the checks package's BenchmarkRunAll and returns its ns/op.
func goBenchRunAll(ctx context.Context, repo string) (float64, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", "^BenchmarkRunAll$", "-benchtime", "10x", "-count", "1", "./checks/")
	cmd.Dir = repo
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return 0, out.String(), err
	}
	sc := bufio.NewScanner(bytes.NewReader(out.Bytes()))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 4 && strings.HasPrefix(f[0], "BenchmarkRunAll") && f[3] == "ns/op" {
			ns, err := strconv.ParseFloat(f[2], 64)
			return ns, out.String(), err
		}
	}
	return 0, out.String(), fmt.Errorf("no BenchmarkRunAll line in the output")
}
