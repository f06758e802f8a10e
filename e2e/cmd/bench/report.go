package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nodeready/nodeready/e2e/framework/stats"
)

// row is one line of the result table: a figure, the goal it is held against (if any)
// and whether it met it.
type row struct {
	Metric string
	Value  string
	Goal   string
	Status string // met, missed, or empty when there is no goal
}

// section is the result of one benchmark: its table rows and, for BENCH.md, notes in
// markdown (breakdowns, what was measured how).
type section struct {
	Title string
	Rows  []row
	Notes []string
	// Failures counts verifications that did not complete: nodes never released, agents
	// that exited with an error. A benchmark reports them; they are not a time.
	Failures int
	Err      error
}

func (s *section) add(metric, value string) {
	s.Rows = append(s.Rows, row{Metric: metric, Value: value})
}

// goal adds a row held against a goal.
func (s *section) goal(metric, value, goal string, met bool) {
	status := "missed"
	if met {
		status = "met"
	}
	s.Rows = append(s.Rows, row{Metric: metric, Value: value, Goal: goal, Status: status})
}

func (s *section) note(format string, args ...any) {
	s.Notes = append(s.Notes, fmt.Sprintf(format, args...))
}

// durations summarises a sample of durations.
type durations []time.Duration

// pct returns the p-th percentile (0 < p <= 100) by the nearest-rank method (stats.Percentile).
func (d durations) pct(p float64) time.Duration { return stats.Percentile(d, p) }

func (d durations) max() time.Duration {
	if len(d) == 0 {
		return 0
	}
	return slices.Max(d)
}

func (d durations) mean() time.Duration {
	if len(d) == 0 {
		return 0
	}
	var sum time.Duration
	for _, v := range d {
		sum += v
	}
	return sum / time.Duration(len(d))
}

// summary renders p50 / p95 / max (and p99 when asked), in milliseconds.
func (d durations) summary(p99 bool) string {
	if len(d) == 0 {
		return "no samples"
	}
	s := fmt.Sprintf("p50 %s, p95 %s", ms(d.pct(50)), ms(d.pct(95)))
	if p99 {
		s += ", p99 " + ms(d.pct(99))
	}
	return s + ", max " + ms(d.max())
}

// ms renders a duration in milliseconds with a precision that suits its size.
func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v >= 10000:
		return fmt.Sprintf("%.1f s", v/1000)
	case v >= 1000:
		return fmt.Sprintf("%.2f s", v/1000)
	case v >= 100:
		return fmt.Sprintf("%.0f ms", v)
	case v >= 10:
		return fmt.Sprintf("%.1f ms", v)
	default:
		return fmt.Sprintf("%.2f ms", v)
	}
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

func mib(bytes float64) string { return fmt.Sprintf("%.1f MiB", bytes/(1<<20)) }

// printTable writes every section as an aligned text table.
func printTable(w io.Writer, sections []*section) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SECTION\tMETRIC\tVALUE\tGOAL\tRESULT")
	for _, s := range sections {
		if s.Err != nil {
			fmt.Fprintf(tw, "%s\t(did not complete)\t%v\t\t\n", s.Title, oneLine(s.Err.Error()))
		}
		for _, r := range s.Rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Title, r.Metric, r.Value, r.Goal, r.Status)
		}
	}
	tw.Flush()
}

// markdownTable renders rows as a GitHub markdown table.
func markdownTable(w io.Writer, rows []row) {
	fmt.Fprintln(w, "| metric | value | goal | result |")
	fmt.Fprintln(w, "| --- | --- | --- | --- |")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", cell(r.Metric), cell(r.Value), cell(r.Goal), cell(r.Status))
	}
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 160 {
		s = s[:157] + "..."
	}
	return s
}
