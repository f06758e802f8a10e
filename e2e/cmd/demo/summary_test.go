package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestSummarize(t *testing.T) {
	r := nodeRecord{Name: "demo-0", Added: at(0), Tainted: true, Kept: true, Signaled: true}
	r.At[created] = at(10)
	r.At[verified] = at(1500)
	r.Untainted = at(1500)
	r.At[deleted] = at(1540)
	r.At[exited] = at(6600)
	r.At[gone] = at(6650)

	s := summarize(r)
	assert.Equal(t, 1500*time.Millisecond, s.ToVerified)
	assert.Equal(t, 40*time.Millisecond, s.ToDeleted)
	assert.Equal(t, 5100*time.Millisecond, s.ToExited)
	assert.True(t, s.HasVerified && s.HasDeleted && s.HasExited)
	assert.Equal(t, "0 on SIGTERM", s.Exit)

	unverified := summarize(nodeRecord{Name: "demo-1", Added: at(0)})
	assert.False(t, unverified.HasVerified || unverified.HasDeleted || unverified.HasExited)
	assert.Equal(t, "-", unverified.Exit)
}

func TestWriteSummary(t *testing.T) {
	var recs []nodeRecord
	for i, verifiedAt := range []int{1200, 1800, 1500} {
		r := nodeRecord{Name: "demo-" + string(rune('0'+i)), Added: at(0), Kept: true}
		r.At[verified], r.Untainted = at(verifiedAt), at(verifiedAt)
		r.At[deleted] = at(verifiedAt + 50)
		r.At[exited] = at(verifiedAt + 5050)
		recs = append(recs, r)
	}
	recs = append(recs, nodeRecord{Name: "demo-3", Added: at(0)})

	var out bytes.Buffer
	writeSummary(&out, recs, "5s")
	got := out.String()
	assert.Contains(t, got, "Summary of 4 nodes")
	assert.Regexp(t, `p50\s+1\.50s\s+0\.05s\s+5\.05s`, got)
	assert.Regexp(t, `max\s+1\.80s\s+0\.05s\s+5\.05s`, got)
	assert.Regexp(t, `demo-3\s+-\s+-\s+-\s+-`, got, "a node never verified shows no times")
	assert.Contains(t, got, "same Node update: 3 of 4 nodes")
	assert.Contains(t, got, "labels left as they were: 3 of 4 nodes")
	assert.Contains(t, got, "SETTLE_TIME=5s")
}

func TestSummaryFitsEightyColumns(t *testing.T) {
	r := nodeRecord{Name: "demo-10", Added: at(0), Kept: true}
	r.At[verified], r.Untainted = at(12_000), at(12_000)
	r.At[deleted] = at(13_000)
	r.At[exited] = at(27_000)
	var out bytes.Buffer
	writeSummary(&out, []nodeRecord{r}, "15s")
	for _, l := range strings.Split(out.String(), "\n") {
		assert.LessOrEqual(t, len(l), 80, "%q", l)
	}
}
