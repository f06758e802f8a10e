package plugin

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/printers"
)

// rewatchBackoff spaces the re-opening of a watch that ended at once, so a server that
// keeps closing it is not asked again in a tight loop; a watch that ran a while is
// re-opened straight away.
var rewatchBackoff = wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 100, Cap: 10 * time.Second}

// fleetWatch is `status --watch`: the nodes as the watch last told them, and what was
// printed of each.
type fleetWatch struct {
	o        *Options
	k        Keys
	selector string
	nodes    map[string]corev1.Node
	rv       string
	// shown is each node's row as printed, without its age; summary is the summary's
	// counts and longest hold as printed.
	shown   map[string]string
	summary string
}

// watchStatus prints the table, then watches the selected nodes (one watch from the LIST's
// resourceVersion, resumed from the last one seen when it ends, listed again when that is
// too old) and prints a node's row again whenever its state, reason, message, startup
// taints or label change, a line for a node deleted, and the summary when it changes. It
// ends with ctx (Ctrl-C).
func (o *Options) watchStatus(ctx context.Context, client Client, k Keys, selector string) error {
	fw := &fleetWatch{o: o, k: k, selector: selector, shown: map[string]string{}}
	w, err := fw.relist(ctx, client)
	if err != nil {
		return err
	}
	defer func() {
		if w != nil {
			w.Stop()
		}
	}()
	s := fw.fleet()
	if err := printTable(o.streams.Out, s, false, o.now()); err != nil {
		return err
	}
	for _, n := range s.Nodes {
		fw.shown[n.Name] = rowKey(n)
	}
	fw.summary = summaryKey(s.Summary)

	backoff := rewatchBackoff
	opened := time.Now()
	for {
		var (
			ev watch.Event
			ok bool
		)
		select {
		case <-ctx.Done():
			return nil
		case ev, ok = <-w.ResultChan():
		}
		if !ok {
			// The server ended the watch (its timeout, a connection lost): resume from the
			// last resourceVersion seen.
			if time.Since(opened) > time.Minute {
				backoff = rewatchBackoff
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff.Step()):
			}
			if w, err = fw.watch(ctx, client); apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				w, err = fw.relist(ctx, client)
			}
			if err != nil {
				return ctxOr(ctx, err)
			}
			opened = time.Now()
			if err := fw.print(); err != nil {
				return err
			}
			continue
		}
		switch ev.Type {
		case watch.Added, watch.Modified:
			if n, ok := ev.Object.(*corev1.Node); ok {
				fw.nodes[n.Name] = *n
				fw.rv = n.ResourceVersion
			}
		case watch.Deleted:
			if n, ok := ev.Object.(*corev1.Node); ok {
				delete(fw.nodes, n.Name)
				fw.rv = n.ResourceVersion
			}
		case watch.Bookmark:
			if m, err := meta.Accessor(ev.Object); err == nil {
				fw.rv = m.GetResourceVersion()
			}
		case watch.Error:
			// Mostly 410 Gone: the resourceVersion is too old to resume from.
			w.Stop()
			if w, err = fw.relist(ctx, client); err != nil {
				return ctxOr(ctx, err)
			}
		}
		if err := fw.print(); err != nil {
			return err
		}
	}
}

// relist lists the nodes and opens the watch from the list's resourceVersion.
func (fw *fleetWatch) relist(ctx context.Context, client Client) (watch.Interface, error) {
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: fw.selector})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	fw.nodes = map[string]corev1.Node{}
	for _, n := range list.Items {
		fw.nodes[n.Name] = n
	}
	fw.rv = list.ResourceVersion
	return fw.watch(ctx, client)
}

// watch opens a watch of the nodes from the last resourceVersion seen.
func (fw *fleetWatch) watch(ctx context.Context, client Client) (watch.Interface, error) {
	w, err := client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{LabelSelector: fw.selector, ResourceVersion: fw.rv, AllowWatchBookmarks: true})
	if err != nil {
		return nil, fmt.Errorf("watch nodes: %w", err)
	}
	return w, nil
}

// fleet judges the nodes as the watch last told them.
func (fw *fleetWatch) fleet() *FleetStatus {
	return fleetOf(fw.k, slices.Collect(maps.Values(fw.nodes)), nil)
}

// print prints the rows that changed since they were printed, a line per node gone, and
// the summary when it changed.
func (fw *fleetWatch) print() error {
	s := fw.fleet()
	now := fw.o.now()
	var changed []NodeStatus
	present := map[string]bool{}
	for _, n := range s.Nodes {
		present[n.Name] = true
		if key := rowKey(n); fw.shown[n.Name] != key {
			fw.shown[n.Name] = key
			changed = append(changed, n)
		}
	}
	out := fw.o.streams.Out
	if len(changed) > 0 {
		if err := printers.NewTablePrinter(printers.PrintOptions{NoHeaders: true}).PrintObj(statusTable(changed, false, now), out); err != nil {
			return err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(fw.shown)) {
		if !present[name] {
			delete(fw.shown, name)
			fmt.Fprintf(out, "node/%s deleted\n", name)
		}
	}
	if key := summaryKey(s.Summary); key != fw.summary {
		fw.summary = key
		_, err := fmt.Fprintln(out, summaryLine(s.Summary, now))
		return err
	}
	return nil
}

// rowKey is what a row tells a person, but its age: a row is printed again when it changes.
func rowKey(n NodeStatus) string {
	label := "<none>"
	if n.Label != nil {
		label = *n.Label
	}
	return strings.Join([]string{string(n.State), n.Reason, n.Message, strings.Join(n.StartupTaints, ","), label}, "\x00")
}

// summaryKey is the summary's counts and longest hold, but its age.
func summaryKey(s Summary) string {
	key := fmt.Sprint(s.Nodes, s.States)
	if s.LongestHold != nil {
		key += " " + s.LongestHold.Node
	}
	return key
}

// ctxOr is nil once ctx is done (Ctrl-C ends a watch), else err.
func ctxOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}
