package reliability

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeready/nodeready/e2e/framework/harness"
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
func (v nodeVersion) labelled() bool { return v.Labels[harness.VerifiedLabel] == "true" }

// tainted: the node carries the startup taint (its key and effect, any value).
func (v nodeVersion) tainted() bool {
	return v.hasTaint(harness.StartupTaint.Key, harness.StartupTaint.Effect)
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

// versions records every version of the nodes matching a selector that a watch delivers:
// unlike harness.History, which keeps the distinct release states, it keeps each version's
// taints, labels and the agent's condition, so a test can replay what every writer saw.
type versions struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	seen    map[string][]nodeVersion
	relists int           // times the watch had to list again, skipping versions
	changed chan struct{} // closed and replaced at every record
}

// watchVersions records the versions of the nodes matching selector until the test ends. It
// returns once the first list is recorded.
func watchVersions(t *testing.T, client kubernetes.Interface, selector string) *versions {
	t.Helper()
	v := &versions{seen: map[string][]nodeVersion{}, changed: make(chan struct{})}
	nodes := client.CoreV1().Nodes()
	list, err := nodes.List(t.Context(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatalf("list nodes %s: %v", selector, err)
	}
	for i := range list.Items {
		v.record(&list.Items[i], false)
	}
	var ctx context.Context
	ctx, v.cancel = context.WithCancel(context.Background())
	t.Cleanup(v.stop)
	v.wg.Go(func() {
		rv := list.ResourceVersion
		for ctx.Err() == nil {
			if rv == "" {
				l, err := nodes.List(ctx, metav1.ListOptions{LabelSelector: selector})
				if err != nil {
					pause(ctx, 100*time.Millisecond)
					continue
				}
				v.mu.Lock()
				v.relists++
				v.mu.Unlock()
				for i := range l.Items {
					v.record(&l.Items[i], false)
				}
				rv = l.ResourceVersion
			}
			w, err := nodes.Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
					rv = ""
				}
				pause(ctx, 100*time.Millisecond)
				continue
			}
			rv = v.follow(w, rv)
		}
	})
	return v
}

func (v *versions) stop() {
	v.cancel()
	v.wg.Wait()
}

func (v *versions) follow(w watch.Interface, rv string) string {
	defer w.Stop()
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Added, watch.Modified, watch.Deleted:
			if n, ok := ev.Object.(*corev1.Node); ok {
				v.record(n, ev.Type == watch.Deleted)
				rv = n.ResourceVersion
			}
		case watch.Bookmark:
			if n, ok := ev.Object.(*corev1.Node); ok {
				rv = n.ResourceVersion
			}
		case watch.Error:
			if status, ok := ev.Object.(*metav1.Status); ok && status.Code == http.StatusGone {
				return ""
			}
		}
	}
	return rv
}

func (v *versions) record(n *corev1.Node, deleted bool) {
	rv, _ := strconv.ParseInt(n.ResourceVersion, 10, 64)
	nv := nodeVersion{RV: rv, Taints: n.Spec.Taints, Labels: n.Labels, Deleted: deleted, At: time.Now(),
		Verdict: harness.AgentCondition(n)}
	v.mu.Lock()
	defer v.mu.Unlock()
	list := v.seen[n.Name]
	if len(list) > 0 && list[len(list)-1].RV >= rv && !deleted {
		return // the same version again, from a list after a reconnect
	}
	v.seen[n.Name] = append(list, nv)
	close(v.changed)
	v.changed = make(chan struct{})
}

// of returns every version of the node seen so far, oldest first.
func (v *versions) of(node string) []nodeVersion {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.seen[node])
}

// latest returns the newest version of the node seen so far.
func (v *versions) latest(node string) (nodeVersion, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	list := v.seen[node]
	if len(list) == 0 {
		return nodeVersion{}, false
	}
	return list[len(list)-1], true
}

// relisted returns how often the watch had to list again, missing versions in between.
func (v *versions) relisted() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.relists
}

// waitFor waits until the newest version of the node satisfies cond, or timeout passes,
// and returns that version. It waits on the watch, not by polling the API server.
func (v *versions) waitFor(ctx context.Context, node string, timeout time.Duration, what string, cond func(nodeVersion) bool) (nodeVersion, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		v.mu.Lock()
		changed := v.changed
		list := v.seen[node]
		v.mu.Unlock()
		if len(list) > 0 && cond(list[len(list)-1]) {
			return list[len(list)-1], nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nodeVersion{}, ctx.Err()
		case <-deadline.C:
			last := "never seen"
			if len(list) > 0 {
				last = list[len(list)-1].String()
			}
			return nodeVersion{}, fmt.Errorf("node %s: not %s within %s; last %s", node, what, timeout, last)
		}
	}
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
