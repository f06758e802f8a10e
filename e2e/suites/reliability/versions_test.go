package reliability

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/history"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// nodeVersion is one version of a node as a watch delivered it.
type nodeVersion struct {
	RV      int64
	Taints  []corev1.Taint
	Labels  map[string]string
	Verdict *corev1.NodeCondition // the agent's condition node-ready/Verified, if any
	Deleted bool
	At      time.Time // when the watch delivered it
}

// labelled: the node carries the verified label with the configured value.
func (v nodeVersion) labelled() bool { return v.Labels[wellknown.VerifiedLabel] == "true" }

// tainted: the node carries the startup taint (its key and effect, any value).
func (v nodeVersion) tainted() bool {
	return v.hasTaint(wellknown.StartupTaint().Key, wellknown.StartupTaint().Effect)
}

// released: verified and untainted, what a release leaves.
func (v nodeVersion) released() bool { return v.labelled() && !v.tainted() && !v.Deleted }

// halfDone: labelled but still tainted, or untainted but not labelled: what a release in
// one write never leaves.
func (v nodeVersion) halfDone() bool { return !v.Deleted && v.labelled() == v.tainted() }

func (v nodeVersion) hasTaint(key string, effect corev1.TaintEffect) bool {
	return slices.ContainsFunc(v.Taints, func(t corev1.Taint) bool { return t.Key == key && t.Effect == effect })
}

func (v nodeVersion) String() string {
	var taints []string
	for _, t := range v.Taints {
		taints = append(taints, t.ToString())
	}
	return fmt.Sprintf("rv %d labelled=%v taints=%v deleted=%v", v.RV, v.labelled(), taints, v.Deleted)
}

// versions is every version of the fleet's nodes, from the fleet's History: unlike its
// States, which keep the distinct release states, it keeps each version's taints, labels and
// the agent's condition, so a test can replay what every writer saw.
type versions struct{ h *framework.History }

func versionOf(e history.Entry[framework.NodeVersion]) nodeVersion {
	return nodeVersion{RV: e.RV, Taints: e.State.Taints, Labels: e.State.Labels, Verdict: e.State.Verdict, Deleted: e.Deleted, At: e.At}
}

// of returns every version of the node seen so far, oldest first.
func (v versions) of(node string) []nodeVersion {
	var out []nodeVersion
	for _, e := range v.h.Entries(node) {
		out = append(out, versionOf(e))
	}
	return out
}

// latest returns the newest version of the node seen so far.
func (v versions) latest(node string) (nodeVersion, bool) {
	e, ok := v.h.Latest(node)
	if !ok {
		return nodeVersion{}, false
	}
	return versionOf(e), true
}

// relisted returns how often the watch had to list again, missing versions in between.
func (v versions) relisted() int { return v.h.Relists() }

// waitFor waits until the newest version of the node satisfies cond, or timeout passes,
// and returns that version. It waits on the watch, not by polling the API server.
func (v versions) waitFor(ctx context.Context, node string, timeout time.Duration, what string, cond func(nodeVersion) bool) (nodeVersion, error) {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	es, err := v.h.Wait(wctx, node, func(es []history.Entry[framework.NodeVersion]) bool {
		return len(es) > 0 && cond(versionOf(es[len(es)-1]))
	})
	switch {
	case err == nil:
		return versionOf(es[len(es)-1]), nil
	case ctx.Err() != nil:
		return nodeVersion{}, ctx.Err()
	}
	last := "never seen"
	if l, ok := v.latest(node); ok {
		last = l.String()
	}
	return nodeVersion{}, fmt.Errorf("node %s: not %s within %s; last %s", node, what, timeout, last)
}

// pause waits for d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
