package main

import (
	"fmt"
	"io"
	"time"

	"github.com/nodeready/nodeready/e2e/framework/stats"
)

// summaryRow is one node's line of the summary.
type summaryRow struct {
	Name string
	// ToVerified: from the node's creation to the verified label.
	ToVerified time.Duration
	// ToDeleted: from the label to the DaemonSet controller deleting the agent pod.
	ToDeleted time.Duration
	// ToExited: from the label to the agent's exit, after its settle window.
	ToExited time.Duration
	// Has* say which of the durations are known.
	HasVerified, HasDeleted, HasExited bool
	Exit                               string
}

func summarize(r nodeRecord) summaryRow {
	s := summaryRow{Name: r.Name, Exit: "-"}
	if r.has(verified) {
		s.ToVerified, s.HasVerified = r.since(verified), true
	}
	s.ToDeleted, s.HasDeleted = r.between(verified, deleted)
	s.ToExited, s.HasExited = r.between(verified, exited)
	switch {
	case r.has(exited) && r.Killed:
		s.Exit = "killed after grace period"
	case r.has(exited):
		s.Exit = fmt.Sprintf("%d on SIGTERM", r.ExitCode)
	case r.Crashes > 0:
		s.Exit = fmt.Sprintf("%d crashes", r.Crashes)
	}
	return s
}

// writeSummary prints the table of per-node timings with their p50 and max, and what the
// run showed about the release.
func writeSummary(w io.Writer, recs []nodeRecord, settle string) {
	table := [][]string{
		{"", "CREATED ->", "VERIFIED ->", "VERIFIED ->", ""},
		{"NODE", "VERIFIED", "POD DELETED", "AGENT EXITED", "AGENT EXIT"},
	}
	var toVerified, toDeleted, toExited []time.Duration
	cell := func(d time.Duration, ok bool, all *[]time.Duration) string {
		if !ok {
			return "-"
		}
		*all = append(*all, d)
		return formatDuration(d)
	}
	oneWrite, kept := 0, 0
	for _, r := range recs {
		s := summarize(r)
		table = append(table, []string{
			s.Name,
			cell(s.ToVerified, s.HasVerified, &toVerified),
			cell(s.ToDeleted, s.HasDeleted, &toDeleted),
			cell(s.ToExited, s.HasExited, &toExited),
			s.Exit,
		})
		if r.has(verified) && r.Untainted.Equal(r.At[verified]) {
			oneWrite++
		}
		if r.Kept {
			kept++
		}
	}
	for _, q := range []struct {
		name string
		p    float64
	}{{"p50", 50}, {"max", 100}} {
		stat := func(ds []time.Duration) string {
			if len(ds) == 0 {
				return "-"
			}
			return formatDuration(stats.Percentile(ds, q.p))
		}
		table = append(table, []string{q.name, stat(toVerified), stat(toDeleted), stat(toExited), ""})
	}

	fmt.Fprintf(w, "\nSummary of %d nodes\n\n", len(recs))
	for _, l := range alignColumns(table) {
		fmt.Fprintln(w, l)
	}
	fmt.Fprintf(w, "\nLabel added and startup taint removed in the same Node update: %d of %d nodes.\n", oneWrite, len(recs))
	fmt.Fprintf(w, "Other taints and labels left as they were: %d of %d nodes.\n", kept, len(recs))
	fmt.Fprintln(w, "The DaemonSet controller deletes the pod right after the label; the agent exits")
	fmt.Fprintf(w, "SETTLE_TIME=%s later, as it watches its node through the SIGTERM in case the\n", settle)
	fmt.Fprintln(w, "startup taint comes back.")
	fmt.Fprintln(w, "Every check target here is on loopback, so the checks pass in their first round;")
	fmt.Fprintln(w, "on a real node, CREATED -> VERIFIED is how long its DNS, pod network and API")
	fmt.Fprintln(w, "access take to work.")
}
