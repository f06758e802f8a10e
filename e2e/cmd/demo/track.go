package main

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// milestone is one step of a node's release, in the order a node passes through them.
type milestone int

const (
	created    milestone = iota // the node is on the watch, normally with the startup taint
	podCreated                  // the DaemonSet controller created an agent pod for it
	running                     // an agent process runs
	verified                    // the node carries the verified label
	deleted                     // the DaemonSet controller deleted the agent pod
	exited                      // the agent process ended on the kubelet's SIGTERM
	gone                        // no agent pod of the node is left in the API
	numMilestones
)

// nodeRecord is what the tracker knows about one node. Times are when the demo saw each
// milestone first; a zero time means not yet.
type nodeRecord struct {
	Name string
	// Added is when the demo asked for the node, as an autoscaler creates it: the origin of
	// every duration shown.
	Added time.Time
	At    [numMilestones]time.Time
	// Tainted: the node had the startup taint when it was first seen (a Karpenter node:
	// once registered).
	Tainted bool
	// Karpenter: Karpenter launched the node (-karpenter); Added is when its Node appeared.
	Karpenter bool
	// Untainted is when the startup taint was first seen gone.
	Untainted time.Time
	// Kept: the node's other taint and label were there when it was last seen.
	Kept bool
	// ExitCode, Signaled and Killed describe the last end of an agent process.
	ExitCode         int
	Signaled, Killed bool
	// Crashes counts agent processes that ended on their own, each restarted by the kubelet.
	Crashes int
	// Pods counts the agent pods seen for the node.
	Pods int
}

// has reports whether the milestone was reached.
func (r nodeRecord) has(m milestone) bool { return !r.At[m].IsZero() }

// since returns how long after the node was added the milestone was reached.
func (r nodeRecord) since(m milestone) time.Duration { return r.At[m].Sub(r.Added) }

// between returns the time from milestone a to milestone b, or false if either is missing.
func (r nodeRecord) between(a, b milestone) (time.Duration, bool) {
	if !r.has(a) || !r.has(b) {
		return 0, false
	}
	return r.At[b].Sub(r.At[a]), true
}

// podRecord is one agent pod as the API and the kubelet report it.
type podRecord struct {
	node  string
	inAPI bool
}

// tracker turns observations of Nodes, agent Pods and the kubelet's processes into one
// record per node. Each source reports what it sees with the time it saw it; a milestone
// keeps the earliest report. It is safe for concurrent use.
type tracker struct {
	mu    sync.Mutex
	nodes map[string]*nodeRecord
	order []string // names in the order they were added
	pods  map[types.UID]*podRecord
	exits map[exitKey]bool
}

type exitKey struct {
	uid types.UID
	at  time.Time
}

func newTracker() *tracker {
	return &tracker{nodes: map[string]*nodeRecord{}, pods: map[types.UID]*podRecord{}, exits: map[exitKey]bool{}}
}

// Added records that the demo is about to create the node.
func (t *tracker) Added(name string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.record(name, at)
}

// Launched records that Karpenter created the node.
func (t *tracker) Launched(name string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.record(name, at).Karpenter = true
}

// record returns the node's record, making it if needed. Called with t.mu held.
func (t *tracker) record(name string, at time.Time) *nodeRecord {
	r := t.nodes[name]
	if r == nil {
		r = &nodeRecord{Name: name, Added: at}
		t.nodes[name] = r
		t.order = append(t.order, name)
	}
	return r
}

// mark sets the milestone's time unless an earlier report set it. Called with t.mu held.
func mark(r *nodeRecord, m milestone, at time.Time) {
	if r.At[m].IsZero() || at.Before(r.At[m]) {
		r.At[m] = at
	}
}

// Node records a Node as the watch saw it.
func (t *tracker) Node(name string, labelled, tainted, kept bool, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.record(name, at)
	if !r.has(created) {
		r.At[created], r.Tainted = at, tainted
	}
	if labelled {
		mark(r, verified, at)
	}
	if !tainted && r.Untainted.IsZero() {
		r.Untainted = at
	}
	r.Kept = kept
}

// Pod records an agent pod bound to (or meant for) node, as the watch saw it.
func (t *tracker) Pod(node string, uid types.UID, isRunning, deleting bool, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.pod(node, uid, at)
	t.pods[uid].inAPI = true
	mark(r, podCreated, at)
	if isRunning {
		mark(r, running, at)
	}
	if deleting {
		mark(r, deleted, at)
	}
}

// pod returns the record of the pod's node, noting a pod not seen before. Called with t.mu
// held.
func (t *tracker) pod(node string, uid types.UID, at time.Time) *nodeRecord {
	r := t.record(node, at)
	if t.pods[uid] == nil {
		t.pods[uid] = &podRecord{node: node}
		r.Pods++
	}
	return r
}

// PodGone records that an agent pod is gone from the API. A pod deleted from the API is
// deleted for good, so it also counts as deleted.
func (t *tracker) PodGone(node string, uid types.UID, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.pod(node, uid, at)
	t.pods[uid].inAPI = false
	mark(r, deleted, at)
	for _, p := range t.pods {
		if p.node == node && p.inAPI {
			return
		}
	}
	mark(r, gone, at)
}

// Process records what the kubelet reports of a pod's agent process.
func (t *tracker) Process(node string, uid types.UID, isRunning bool, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.pod(node, uid, at)
	mark(r, podCreated, at)
	if isRunning {
		mark(r, running, at)
	}
}

// Exit records an end of an agent process that the kubelet reported; the same end reported
// again is ignored. An end after the kubelet's SIGTERM is the agent leaving; an end on its
// own is a crash, which the kubelet restarts.
func (t *tracker) Exit(node string, uid types.UID, code int, signaled, killed bool, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	key := exitKey{uid, at}
	if t.exits[key] {
		return
	}
	t.exits[key] = true
	r := t.pod(node, uid, at)
	r.ExitCode, r.Signaled, r.Killed = code, signaled, killed
	if !signaled {
		r.Crashes++
		return
	}
	mark(r, exited, at)
}

// Records returns a copy of every node's record, in the order the nodes were added.
func (t *tracker) Records() []nodeRecord {
	t.mu.Lock()
	defer t.mu.Unlock()
	recs := make([]nodeRecord, 0, len(t.order))
	for _, name := range t.order {
		recs = append(recs, *t.nodes[name])
	}
	return recs
}

// finished reports whether every node is done: verified, its agent exited and no agent pod
// left.
func finished(recs []nodeRecord, want int) bool {
	if len(recs) < want {
		return false
	}
	return !slices.ContainsFunc(recs, func(r nodeRecord) bool {
		return !r.has(verified) || !r.has(exited) || !r.has(gone)
	})
}

// overdue returns the first node that is not done deadline after it was added, if any.
func overdue(recs []nodeRecord, now time.Time, deadline time.Duration) (nodeRecord, bool) {
	for _, r := range recs {
		done := r.has(verified) && r.has(exited) && r.has(gone)
		if !done && now.Sub(r.Added) > deadline {
			return r, true
		}
	}
	return nodeRecord{}, false
}
