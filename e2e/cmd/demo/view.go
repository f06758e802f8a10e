package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// view shows the nodes' progress as it happens.
type view interface {
	// Show brings the view up to date with the records as of now.
	Show(now time.Time, recs []nodeRecord)
	// Close shows the records a last time and leaves the terminal as it was.
	Close(now time.Time, recs []nodeRecord)
}

// viewInfo is what the views say about the run besides the records.
type viewInfo struct {
	Nodes    int
	Interval time.Duration
	Settle   string // the agents' SETTLE_TIME
	Start    time.Time
}

// columns are the milestones with a column of their own, and the column headers. A node is
// created with the startup taint, so "created" needs no column: it is the origin.
var columns = []struct {
	m    milestone
	head string
}{
	{podCreated, "POD"},
	{running, "RUNNING"},
	{verified, "VERIFIED"},
	{deleted, "DELETED"},
	{exited, "EXITED"},
	{gone, "GONE"},
}

// stateOf names how far the node has come, in a few words.
func stateOf(r nodeRecord) string {
	switch {
	case r.has(gone) && r.has(exited) && r.ExitCode != 0:
		return fmt.Sprintf("agent gone, exit %d", r.ExitCode)
	case r.has(gone) && r.has(exited):
		return "agent gone"
	case r.has(gone):
		return "pod gone"
	case r.has(exited):
		return "agent exited"
	case r.has(deleted):
		return "agent settling"
	case r.has(verified) && r.Untainted.IsZero():
		return "labelled, tainted"
	case r.has(verified):
		return "verified"
	case r.has(running) && r.Crashes == 1:
		return "running, 1 crash"
	case r.has(running) && r.Crashes > 1:
		return fmt.Sprintf("running, %d crashes", r.Crashes)
	case r.has(running):
		return "agent running"
	case r.has(podCreated):
		return "agent pending"
	case r.has(created) && !r.Tainted:
		return "not tainted"
	case r.has(created):
		return "tainted"
	default:
		return "creating"
	}
}

// row is one node's line of the live table: its name, state, and the time since it was
// added of each milestone with a column, "-" when not reached yet.
func row(r nodeRecord) []string {
	cells := []string{r.Name, stateOf(r)}
	for _, c := range columns {
		cell := "-"
		if r.has(c.m) {
			cell = formatDuration(r.since(c.m))
		}
		cells = append(cells, cell)
	}
	return cells
}

// renderTable returns the lines of the live view: a title, the table of nodes and a legend.
func renderTable(info viewInfo, now time.Time, recs []nodeRecord) []string {
	elapsed := time.Duration(0)
	if !info.Start.IsZero() {
		elapsed = now.Sub(info.Start)
	}
	lines := []string{
		fmt.Sprintf("nodeready demo: %d nodes, one every %s  (%s since the first)", info.Nodes, info.Interval, formatDuration(elapsed)),
		"",
	}
	head := []string{"NODE", "STATE"}
	for _, c := range columns {
		head = append(head, c.head)
	}
	table := [][]string{head}
	for _, r := range recs {
		table = append(table, row(r))
	}
	lines = append(lines, alignColumns(table)...)
	return append(lines,
		"",
		"Times since each node was created. VERIFIED: labelled and untainted in one",
		"write. DELETED: the DaemonSet controller deleted the agent pod; the agent keeps",
		fmt.Sprintf("watching its node for SETTLE_TIME=%s (settling), then EXITED on the SIGTERM.", info.Settle),
		"GONE: the pod left the API.",
	)
}

// alignColumns pads the cells of each column to the column's width, two spaces apart.
func alignColumns(table [][]string) []string {
	var widths []int
	for _, cells := range table {
		for i, c := range cells {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	lines := make([]string, 0, len(table))
	for _, cells := range table {
		var b strings.Builder
		for i, c := range cells {
			if i > 0 {
				b.WriteString("  ")
			}
			b.WriteString(c)
			if i < len(cells)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)))
			}
		}
		lines = append(lines, strings.TrimRight(b.String(), " "))
	}
	return lines
}

// formatDuration shows a duration in seconds with two decimals, or one from 10 s on.
func formatDuration(d time.Duration) string {
	if d >= 10*time.Second || d <= -10*time.Second {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// transition is a milestone a node reached between two looks at the records.
type transition struct {
	Node  string
	M     milestone
	At    time.Time
	Since time.Duration // since the node was added
	Text  string
}

// transitions returns the milestones reached in cur that prev had not, oldest first.
func transitions(prev, cur []nodeRecord) []transition {
	before := map[string]nodeRecord{}
	for _, r := range prev {
		before[r.Name] = r
	}
	var out []transition
	for _, r := range cur {
		old := before[r.Name]
		for m := range numMilestones {
			if r.has(m) && !old.has(m) {
				out = append(out, transition{Node: r.Name, M: m, At: r.At[m], Since: r.since(m), Text: describe(r, m)})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b transition) int {
		return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.M, b.M))
	})
	return out
}

// describe says in words what reaching the milestone means for the node.
func describe(r nodeRecord, m milestone) string {
	switch m {
	case created:
		if r.Karpenter && r.Tainted {
			return "registered by Karpenter, with the startup taint"
		}
		if !r.Tainted {
			return "created without the startup taint"
		}
		return "created with the startup taint"
	case podCreated:
		return "agent pod created"
	case running:
		return "agent running its checks"
	case verified:
		if r.Untainted.IsZero() || !r.Untainted.Equal(r.At[verified]) {
			return "labelled verified (startup taint not removed in the same write)"
		}
		return "verified: labelled and untainted in one write"
	case deleted:
		return "agent pod deleted by the DaemonSet controller"
	case exited:
		if r.Killed {
			return "agent killed after its grace period"
		}
		return fmt.Sprintf("agent exited %d on SIGTERM", r.ExitCode)
	case gone:
		return "agent pod gone from the API"
	}
	return ""
}

// lineView appends one line per transition: for logs, pipes and CI.
type lineView struct {
	w    io.Writer
	info viewInfo
	prev []nodeRecord
}

func newLineView(w io.Writer, info viewInfo) *lineView {
	fmt.Fprintf(w, "%8s  %-8s  %-46s  %s\n", "ELAPSED", "NODE", "TRANSITION", "SINCE CREATED")
	return &lineView{w: w, info: info}
}

func (v *lineView) Show(_ time.Time, recs []nodeRecord) {
	for _, t := range transitions(v.prev, recs) {
		fmt.Fprintf(v.w, "%8s  %-8s  %-46s  %s\n", formatDuration(t.At.Sub(v.info.Start)), t.Node, t.Text, formatDuration(t.Since))
	}
	v.prev = recs
}

func (v *lineView) Close(now time.Time, recs []nodeRecord) { v.Show(now, recs) }

// ttyView redraws the table in place with ANSI escapes: up to the first line drawn, clear to
// the end of the screen, draw again. What was printed before the table stays above it, and
// the last frame stays on the screen.
type ttyView struct {
	w     io.Writer
	info  viewInfo
	size  func() (width, height int)
	drawn int // lines drawn by the last frame
}

const (
	hideCursor  = "\x1b[?25l"
	showCursor  = "\x1b[?25h"
	clearScreen = "\x1b[H\x1b[2J"
	clearBelow  = "\x1b[J"
)

func newTTYView(w io.Writer, info viewInfo, size func() (width, height int)) *ttyView {
	io.WriteString(w, hideCursor)
	return &ttyView{w: w, info: info, size: size}
}

func (v *ttyView) Show(now time.Time, recs []nodeRecord) {
	io.WriteString(v.w, v.frame(renderTable(v.info, now, recs)))
}

// frame returns the escapes and text that replace the last frame with lines.
func (v *ttyView) frame(lines []string) string {
	width, height := v.size()
	var b strings.Builder
	switch {
	case v.drawn > 0 && v.drawn < height:
		fmt.Fprintf(&b, "\x1b[%dF", v.drawn) // to the start of the first line drawn
		b.WriteString(clearBelow)
	case v.drawn > 0:
		// The last frame scrolled off the top: moving up cannot reach its first line.
		b.WriteString(clearScreen)
	}
	for _, l := range lines {
		b.WriteString(truncate(l, width-1))
		b.WriteByte('\n')
	}
	v.drawn = len(lines)
	return b.String()
}

func (v *ttyView) Close(now time.Time, recs []nodeRecord) {
	v.Show(now, recs)
	io.WriteString(v.w, showCursor)
}

// truncate cuts s to at most n characters, so that no line wraps and the count of lines
// drawn stays right; n <= 0 leaves s as it is.
func truncate(s string, n int) string {
	if n <= 0 || utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}
