package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// TestRowsFollowRelease feeds the tracker the observations of one node's release, in the
// order they arrive, and checks the node's row after each.
func TestRowsFollowRelease(t *testing.T) {
	const uid = types.UID("pod-1")
	tr := newTracker()
	tr.Added("demo-0", at(0))

	steps := []struct {
		name    string
		observe func()
		want    []string
	}{
		{"added", func() {}, []string{"demo-0", "creating", "-", "-", "-", "-", "-", "-"}},
		{"node seen tainted", func() { tr.Node("demo-0", false, true, true, at(20)) },
			[]string{"demo-0", "tainted", "-", "-", "-", "-", "-", "-"}},
		{"pod created", func() { tr.Pod("demo-0", uid, false, false, at(150)) },
			[]string{"demo-0", "agent pending", "0.15s", "-", "-", "-", "-", "-"}},
		{"kubelet started the process", func() { tr.Process("demo-0", uid, true, at(400)) },
			[]string{"demo-0", "agent running", "0.15s", "0.40s", "-", "-", "-", "-"}},
		{"pod status running, later", func() { tr.Pod("demo-0", uid, true, false, at(600)) },
			[]string{"demo-0", "agent running", "0.15s", "0.40s", "-", "-", "-", "-"}},
		{"labelled and untainted", func() { tr.Node("demo-0", true, false, true, at(1500)) },
			[]string{"demo-0", "verified", "0.15s", "0.40s", "1.50s", "-", "-", "-"}},
		{"pod deleted", func() { tr.Pod("demo-0", uid, true, true, at(1540)) },
			[]string{"demo-0", "agent settling", "0.15s", "0.40s", "1.50s", "1.54s", "-", "-"}},
		{"agent exited", func() { tr.Exit("demo-0", uid, 0, true, false, at(6550)) },
			[]string{"demo-0", "agent exited", "0.15s", "0.40s", "1.50s", "1.54s", "6.55s", "-"}},
		{"pod gone", func() { tr.PodGone("demo-0", uid, at(6600)) },
			[]string{"demo-0", "agent gone", "0.15s", "0.40s", "1.50s", "1.54s", "6.55s", "6.60s"}},
		{"exit reported again", func() { tr.Exit("demo-0", uid, 0, true, false, at(6550)) },
			[]string{"demo-0", "agent gone", "0.15s", "0.40s", "1.50s", "1.54s", "6.55s", "6.60s"}},
	}
	for _, s := range steps {
		s.observe()
		recs := tr.Records()
		require.Len(t, recs, 1, s.name)
		assert.Equal(t, s.want, row(recs[0]), s.name)
	}
	r := tr.Records()[0]
	assert.Equal(t, 1, r.Pods)
	assert.True(t, r.Tainted)
	assert.Equal(t, r.At[verified], r.Untainted, "label and untaint in the same update")
	assert.True(t, finished(tr.Records(), 1))
}

func TestTrackerKeepsEarliestReport(t *testing.T) {
	tr := newTracker()
	tr.Added("n", at(0))
	// The API's pod status arrives before the kubelet's record is polled, with a later
	// time stamp than the poll: the earlier one wins whatever the order of arrival.
	tr.Pod("n", "u", true, false, at(900))
	tr.Process("n", "u", true, at(700))
	assert.Equal(t, at(700), tr.Records()[0].At[running])
}

func TestTrackerStates(t *testing.T) {
	tests := []struct {
		name    string
		observe func(tr *tracker)
		want    string
	}{
		{"born without the taint", func(tr *tracker) { tr.Node("n", false, false, true, at(1)) }, "not tainted"},
		{"labelled but still tainted", func(tr *tracker) { tr.Node("n", true, true, true, at(1)) }, "labelled, tainted"},
		{"crashed and restarted", func(tr *tracker) {
			tr.Process("n", "u", true, at(1))
			tr.Exit("n", "u", 2, false, false, at(2))
			tr.Process("n", "u", true, at(3))
		}, "running, 1 crash"},
		{"failed exit", func(tr *tracker) {
			tr.Exit("n", "u", 1, true, false, at(2))
			tr.PodGone("n", "u", at(3))
		}, "agent gone, exit 1"},
		{"gone before the kubelet's exit was seen", func(tr *tracker) { tr.PodGone("n", "u", at(3)) }, "pod gone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTracker()
			tr.Added("n", at(0))
			tt.observe(tr)
			assert.Equal(t, tt.want, stateOf(tr.Records()[0]))
		})
	}
}

func TestGoneWaitsForEveryPod(t *testing.T) {
	tr := newTracker()
	tr.Added("n", at(0))
	tr.Pod("n", "a", true, false, at(1))
	tr.Pod("n", "b", false, false, at(2))
	tr.PodGone("n", "a", at(3))
	assert.False(t, tr.Records()[0].has(gone), "pod b is still there")
	tr.PodGone("n", "b", at(4))
	r := tr.Records()[0]
	assert.Equal(t, at(4), r.At[gone])
	assert.Equal(t, 2, r.Pods)
}

func TestFinishedAndOverdue(t *testing.T) {
	done := nodeRecord{Name: "a", Added: at(0)}
	for m := range numMilestones {
		done.At[m] = at(int(m) + 1)
	}
	stuck := nodeRecord{Name: "b", Added: at(1000)}
	stuck.At[running] = at(2000)

	assert.True(t, finished([]nodeRecord{done}, 1))
	assert.False(t, finished([]nodeRecord{done}, 2), "a node not added yet")
	assert.False(t, finished([]nodeRecord{done, stuck}, 2))

	_, late := overdue([]nodeRecord{done, stuck}, at(60_000), time.Minute)
	assert.False(t, late, "b was added 59 s ago")
	r, late := overdue([]nodeRecord{done, stuck}, at(61_001), time.Minute)
	assert.True(t, late)
	assert.Equal(t, "b", r.Name)
}
