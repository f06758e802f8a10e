package main

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTransitions(t *testing.T) {
	a := nodeRecord{Name: "demo-0", Added: at(0), Tainted: true}
	a.At[created] = at(10)
	b := nodeRecord{Name: "demo-1", Added: at(1000), Tainted: true}

	// The first look shows the node created; the second its agent's exit and pod removal,
	// and demo-1 created in between, all in time order.
	first := transitions(nil, []nodeRecord{a})
	require.Len(t, first, 1)
	assert.Equal(t, "created with the startup taint", first[0].Text)

	a2 := a
	a2.At[verified], a2.Untainted = at(1500), at(1500)
	a2.At[exited], a2.Signaled = at(6500), true
	a2.At[gone] = at(6500)
	b.At[created] = at(1010)
	got := transitions([]nodeRecord{a}, []nodeRecord{a2, b})
	var texts []string
	for _, tr := range got {
		texts = append(texts, tr.Node+": "+tr.Text)
	}
	assert.Equal(t, []string{
		"demo-1: created with the startup taint",
		"demo-0: verified: labelled and untainted in one write",
		"demo-0: agent exited 0 on SIGTERM",
		"demo-0: agent pod gone from the API",
	}, texts)
	assert.Equal(t, 10*time.Millisecond, got[0].Since, "since demo-1 was added")

	assert.Empty(t, transitions([]nodeRecord{a2, b}, []nodeRecord{a2, b}), "nothing new")
}

func TestDescribeVerifiedWithoutUntaint(t *testing.T) {
	r := nodeRecord{Name: "n", Added: at(0)}
	r.At[verified] = at(5)
	assert.Contains(t, describe(r, verified), "not removed in the same write")
}

func TestLineView(t *testing.T) {
	var out bytes.Buffer
	v := newLineView(&out, viewInfo{Start: at(0)})
	r := nodeRecord{Name: "demo-0", Added: at(0), Tainted: true}
	r.At[created] = at(20)
	v.Show(at(100), []nodeRecord{r})
	v.Show(at(200), []nodeRecord{r})
	r.At[podCreated] = at(300)
	v.Close(at(400), []nodeRecord{r})

	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 3, "a header and one line per transition:\n%s", out.String())
	assert.Regexp(t, `^\s+0\.02s\s+demo-0\s+created with the startup taint\s+0\.02s$`, lines[1])
	assert.Regexp(t, `^\s+0\.30s\s+demo-0\s+agent pod created\s+0\.30s$`, lines[2])
}

func TestTTYViewRedrawsInPlace(t *testing.T) {
	var out bytes.Buffer
	height := 50
	v := newTTYView(&out, viewInfo{Nodes: 1, Interval: time.Second, Settle: "5s", Start: at(0)},
		func() (int, int) { return 80, height })
	recs := []nodeRecord{{Name: "demo-0", Added: at(0)}}

	v.Show(at(100), recs)
	first := out.String()
	assert.True(t, strings.HasPrefix(first, hideCursor))
	assert.NotContains(t, first, "\x1b[J", "nothing to clear the first time")
	drawn := strings.Count(first, "\n")
	for _, l := range strings.Split(first, "\n") {
		assert.LessOrEqual(t, len([]rune(l)), 79+len(hideCursor), "no line wraps at 80 columns: %q", l)
	}

	out.Reset()
	v.Show(at(200), recs)
	assert.True(t, strings.HasPrefix(out.String(), "\x1b["+strconv.Itoa(drawn)+"F"+clearBelow), "back up over the last frame: %q", out.String()[:12])

	out.Reset()
	height = 5
	v.Close(at(300), recs)
	assert.True(t, strings.HasPrefix(out.String(), clearScreen), "a frame taller than the screen cannot be reached by moving up")
	assert.True(t, strings.HasSuffix(out.String(), showCursor))
}

func TestTableFitsEightyColumns(t *testing.T) {
	// The widest cells: two-digit node numbers and seconds, and the longest states.
	done := nodeRecord{Name: "demo-10", Added: at(0), ExitCode: 1}
	for m := range numMilestones {
		done.At[m] = at(10_000 + int(m)*1000)
	}
	crashed := nodeRecord{Name: "demo-11", Added: at(0), Crashes: 3}
	crashed.At[running] = at(10_000)
	recs := []nodeRecord{done, crashed}
	require.Equal(t, "agent gone, exit 1", stateOf(done))
	require.Equal(t, "running, 3 crashes", stateOf(crashed))

	for _, l := range renderTable(viewInfo{Nodes: 12, Interval: time.Second, Settle: "15s", Start: at(0)}, at(99_000), recs) {
		assert.LessOrEqual(t, utf8.RuneCountInString(l), 79, "%q", l)
	}
}
