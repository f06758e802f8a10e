package reliability

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// TestConcurrentWriters: while agents verify their nodes again and again, three other
// writers per node (playing a CNI, a CSI node agent and node-feature-discovery) add and
// remove their own taints and labels on the same nodes as fast as they can, with JSON Patch
// tests and resourceVersion updates. Every verification ends with the label and without the
// startup taint, and no writer's taint or label is ever lost or brought back: neither in the
// final nodes nor in any version of them a watch delivered.
func TestConcurrentWriters(t *testing.T) {
	// Few nodes, many verifications each: the writers' pressure on each node stays high,
	// and the machine keeps up (each verification ends before the next begins).
	const (
		nodes  = 10
		cycles = 20 // verifications per node: the first, then re-verifications
	)
	e := setup(t)
	f := e.fleet(t, "writers")
	client := e.fw.Client()
	writerAPI := writerClient(t, e.fw)
	ctx := t.Context()
	from := e.audit.offset(t)
	began := time.Now()

	// A short settle window: the agents' watch is not what this test is about, and each
	// re-verification waits for the previous agent to end.
	names := f.addNodes(t, "", nodes, framework.NodeOptions{Env: map[string]string{"SETTLE_TIME": "2s"}}, nil)
	// The API server's TaintNodesByCondition admission gives each new Node the not-ready
	// NoSchedule taint, and the node lifecycle controller removes it with a patch checked on
	// the resourceVersion. Writers at full speed starve that patch for as long as they write
	// (seven of ten nodes kept the taint for two minutes in one run), and the agent, which
	// lists its tolerations, waits for it like any other pod. The writers start on nodes
	// the cluster has made schedulable, as a real node's writers slow down once it joined.
	require.NoError(t, waitSchedulable(ctx, client, names))

	stop := make(chan struct{})
	var writing sync.WaitGroup
	writers := map[string][]*writer{}
	for _, n := range names {
		writers[n] = []*writer{
			newWriter(writerAPI, n, "cni", patchTaint),
			newWriter(writerAPI, n, "csi", updateTaintAndLabel),
			newWriter(writerAPI, n, "nfd", patchLabel),
		}
		for _, w := range writers[n] {
			writing.Go(func() { w.run(stop) })
		}
	}
	stopWriters := sync.OnceFunc(func() {
		close(stop)
		writing.Wait()
	})
	t.Cleanup(stopWriters)

	var verified atomic.Int64
	onEachNode(t, names, func(_ int, n string) error {
		var after int64 // the re-verification's write: the release must come later
		for i := range cycles {
			v, err := f.versions.waitFor(ctx, n, framework.WaitTimeout, "released", func(v nodeVersion) bool { return v.RV > after && v.released() })
			if err != nil {
				return err
			}
			if !v.hasTaint(wellknown.StartupTaint().Key, "PreferNoSchedule") || v.Labels[framework.ForeignLabel] != framework.ForeignLabelValue {
				return fmt.Errorf("node %s released without its foreign taints and labels: %s", n, v)
			}
			if err := f.waitAgentsDone(ctx, n, i+1); err != nil {
				return err
			}
			verified.Add(1)
			if i == cycles-1 {
				return nil
			}
			if after, err = reverify(ctx, client, n); err != nil {
				return err
			}
		}
		return nil
	})
	stopWriters()
	elapsed := time.Since(began)

	var writes, conflicts int
	for _, n := range names {
		node, err := client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		require.NoError(t, err)
		final := nodeVersion{Taints: node.Spec.Taints, Labels: node.Labels}
		assert.True(t, final.released(), "node %s at the end: %s", n, final)
		for _, w := range writers[n] {
			w.mu.Lock()
			writes += w.writes
			conflicts += w.conflicts
			assert.Empty(t, w.errors, "writer %s of %s failed", w.name, n)
			assert.Empty(t, w.surprises, "writer %s of %s found its items changed by someone else", w.name, n)
			for _, it := range w.items {
				assert.Equal(t, w.belief[it.String()], it.in(node.Spec.Taints, node.Labels),
					"%s of writer %s on %s at the end: lost or brought back", it, w.name, n)
			}
			w.mu.Unlock()
		}
	}

	var versions, lost, resurrected int
	for _, n := range names {
		vs := f.versions.of(n)
		versions += len(vs)
		l, r := newReplay(writers[n]).check(vs)
		lost += len(l)
		resurrected += len(r)
		assert.Empty(t, l, "node %s: foreign items lost", n)
		assert.Empty(t, r, "node %s: foreign items brought back", n)
	}
	assert.Zero(t, f.versions.relisted(), "the watch missed versions; the replay would be incomplete")
	halfChecked := f.assertNeverHalfDone(t, names...)

	var want []framework.NodeState
	for range cycles {
		want = append(want, framework.Unverified, framework.Released)
	}
	f.assertStates(t, want, names...)
	exits := f.assertExits(t, names...)

	agent := e.audit.since(t, from, names...)
	codes := map[int]int{}
	for _, ev := range agent {
		if ev.key() == (requestKey{"PATCH", "nodes"}) {
			codes[ev.code()]++
		}
	}
	assert.EqualValues(t, nodes*cycles, verified.Load())
	t.Logf("%d verifications on %d nodes in %s; %d agent processes, all exit 0 on SIGTERM", verified.Load(), nodes, elapsed.Round(time.Second), exits)
	t.Logf("foreign writers: %d writes (%.0f/s), %d lost locks retried; lost %d, brought back %d, in %d node versions replayed (%d checked for half releases)",
		writes, float64(writes)/elapsed.Seconds(), conflicts, lost, resurrected, versions, halfChecked)
	t.Logf("agent release patches by answer: %s (422: the taint list changed since the agent read it; re-read and retried)", formatCodes(codes))
}

// formatCodes formats counts by HTTP status code.
func formatCodes(codes map[int]int) string {
	var parts []string
	for _, c := range slices.Sorted(maps.Keys(codes)) {
		parts = append(parts, fmt.Sprintf("%d: %d", c, codes[c]))
	}
	return strings.Join(parts, ", ")
}

// waitSchedulable waits until the node lifecycle controller has taken the registration's
// not-ready taint off every node.
func waitSchedulable(ctx context.Context, client kubernetes.Interface, names []string) error {
	for _, n := range names {
		var taints []corev1.Taint
		err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, framework.WaitTimeout, true, func(ctx context.Context) (bool, error) {
			node, err := client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			taints = node.Spec.Taints
			return !slices.ContainsFunc(taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady }), nil
		})
		if err != nil {
			return fmt.Errorf("node %s kept the not-ready taint; taints %v: %w", n, taints, err)
		}
	}
	return nil
}
