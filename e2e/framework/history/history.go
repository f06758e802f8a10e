// Package history records what a watch of nodes, pods or other objects delivers: what the
// caller derives from each version, with its resource version and the time it arrived. It is
// the one recorder of the tests, the benchmarks and the demo; each derives from the entries
// what it needs (state sequences, the first time a predicate held, timelines), or follows
// them as they come (Follow).
package history

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// Entry is what was recorded of one version of an object.
type Entry[S any] struct {
	State S         // what the recorder's state function made of the version
	RV    int64     // its resource version
	At    time.Time // when the list or the watch delivered it
	// Listed: it came from a list (the first, or one after 410 Gone), not from a watch event.
	Listed bool
	// Deleted: the object is gone, State is of its last version. A deletion found by a
	// list (the object missing from it) is Listed too.
	Deleted bool
}

// Source is what to watch: objects of one kind, in one namespace or cluster-scoped, so that
// a name identifies an object.
type Source struct {
	What    string // for errors, such as "nodes fleet=a"
	List    func(context.Context, metav1.ListOptions) (runtime.Object, error)
	Watch   func(context.Context, metav1.ListOptions) (watch.Interface, error)
	Options metav1.ListOptions // selectors; the recorder sets the resource version
}

// Client is a typed or dynamic client of one kind of object, such as
// client.CoreV1().Pods(namespace) or a dynamic client's Resource(gvr).
type Client[L runtime.Object] interface {
	List(context.Context, metav1.ListOptions) (L, error)
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
}

// From is the objects of c matching opts; what names them in errors.
func From[L runtime.Object](what string, c Client[L], opts metav1.ListOptions) Source {
	return Source{
		What:    what + " " + selectors(opts),
		List:    func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return c.List(ctx, o) },
		Watch:   c.Watch,
		Options: opts,
	}
}

// Nodes is the nodes matching opts.
func Nodes(client kubernetes.Interface, opts metav1.ListOptions) Source {
	return From("nodes", client.CoreV1().Nodes(), opts)
}

// Pods is the pods of namespace matching opts.
func Pods(client kubernetes.Interface, namespace string, opts metav1.ListOptions) Source {
	return From("pods "+namespace, client.CoreV1().Pods(namespace), opts)
}

// Events is the core/v1 Events of namespace matching opts.
func Events(client kubernetes.Interface, namespace string, opts metav1.ListOptions) Source {
	return From("events "+namespace, client.CoreV1().Events(namespace), opts)
}

func selectors(o metav1.ListOptions) string { return o.LabelSelector + " " + o.FieldSelector }

// Recorder records, per object name, an entry for every version a watch delivers. Its
// methods are safe for concurrent use.
type Recorder[S any] struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	entries   map[string][]Entry[S]
	names     []string // in the order first seen
	relists   int
	changed   chan struct{} // closed and replaced at every entry
	followers []*follower[S]
}

type follower[S any] struct{ fn func(string, Entry[S]) }

// reconnectInterval is how soon the watch tries again after an error.
const reconnectInterval = 100 * time.Millisecond

// Record lists src, records what state makes of each object, then records every version a
// watch delivers until ctx ends or Stop. It returns once the first list is recorded, so no
// later change is missed.
//
// It watches with a plain loop instead of an informer: an informer's reflector backs off for
// up to half a minute after an API server restart, and the changes it would then miss are
// exactly what a restart test must see. This loop reconnects within a fraction of a second
// and resumes from the last resource version; only when the API server no longer has that
// version (410 Gone) does it list again.
func Record[T runtime.Object, S any](ctx context.Context, src Source, state func(T) S) (*Recorder[S], error) {
	r := &Recorder[S]{entries: map[string][]Entry[S]{}, changed: make(chan struct{})}
	add := func(obj runtime.Object, listed, deleted bool) string {
		o, ok := obj.(T)
		m, err := meta.Accessor(obj)
		if !ok || err != nil {
			return ""
		}
		r.record(m.GetName(), Entry[S]{State: state(o), RV: parseRV(m.GetResourceVersion()), At: time.Now(), Listed: listed, Deleted: deleted})
		return m.GetResourceVersion()
	}
	rv, err := r.list(ctx, src, add)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", src.What, err)
	}
	ctx, r.cancel = context.WithCancel(ctx)
	r.wg.Go(func() {
		for ctx.Err() == nil {
			if rv == "" {
				if rv, err = r.list(ctx, src, add); err != nil {
					sleep(ctx, reconnectInterval)
					continue
				}
				r.mu.Lock()
				r.relists++
				r.mu.Unlock()
			}
			o := src.Options
			o.ResourceVersion, o.AllowWatchBookmarks = rv, true
			w, err := src.Watch(ctx, o)
			if err != nil {
				if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
					rv = ""
				}
				sleep(ctx, reconnectInterval)
				continue
			}
			rv = follow(ctx, w, rv, add)
		}
	})
	return r, nil
}

// list records every object of src and, for an object recorded before and missing now, a
// deletion, as an informer would. It returns the list's resource version.
func (r *Recorder[S]) list(ctx context.Context, src Source, add func(runtime.Object, bool, bool) string) (string, error) {
	o := src.Options
	o.ResourceVersion = ""
	l, err := src.List(ctx, o)
	if err != nil {
		return "", err
	}
	items, err := meta.ExtractList(l)
	if err != nil {
		return "", err
	}
	listMeta, err := meta.ListAccessor(l)
	if err != nil {
		return "", err
	}
	present := map[string]bool{}
	for _, obj := range items {
		add(obj, true, false)
		if m, err := meta.Accessor(obj); err == nil {
			present[m.GetName()] = true
		}
	}
	r.mu.Lock()
	var gone []string
	for _, name := range r.names {
		if es := r.entries[name]; !present[name] && !es[len(es)-1].Deleted {
			gone = append(gone, name)
		}
	}
	r.mu.Unlock()
	for _, name := range gone {
		last, _ := r.Latest(name)
		r.record(name, Entry[S]{State: last.State, RV: parseRV(listMeta.GetResourceVersion()), At: time.Now(), Listed: true, Deleted: true})
	}
	return listMeta.GetResourceVersion(), nil
}

// follow records the events of one watch until it or ctx ends and returns the resource
// version to resume from, or "" to list again.
func follow(ctx context.Context, w watch.Interface, rv string, add func(runtime.Object, bool, bool) string) string {
	defer w.Stop()
	for {
		var ev watch.Event
		select {
		case <-ctx.Done():
			return rv
		case e, ok := <-w.ResultChan():
			if !ok {
				return rv
			}
			ev = e
		}
		switch ev.Type {
		case watch.Added, watch.Modified, watch.Deleted:
			if v := add(ev.Object, false, ev.Type == watch.Deleted); v != "" {
				rv = v
			}
		case watch.Bookmark:
			if m, err := meta.Accessor(ev.Object); err == nil {
				rv = m.GetResourceVersion()
			}
		case watch.Error:
			if status, ok := ev.Object.(*metav1.Status); ok && status.Code == http.StatusGone {
				return ""
			}
		}
	}
}

func (r *Recorder[S]) record(name string, e Entry[S]) {
	r.mu.Lock()
	defer r.mu.Unlock()
	es, seen := r.entries[name]
	if !seen {
		r.names = append(r.names, name)
	}
	if n := len(es); n > 0 && !e.Deleted && e.RV > 0 && es[n-1].RV >= e.RV {
		return // a version already recorded, listed again after a reconnect
	}
	r.entries[name] = append(es, e)
	close(r.changed)
	r.changed = make(chan struct{})
	// Under the lock, so that every follower sees the entries in order.
	for _, f := range r.followers {
		f.fn(name, e)
	}
}

func parseRV(rv string) int64 {
	n, _ := strconv.ParseInt(rv, 10, 64)
	return n
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Stop ends the watch and waits for it. The entries stay readable. It is idempotent.
func (r *Recorder[S]) Stop() {
	r.cancel()
	r.wg.Wait()
}

// Follow calls fn with every entry recorded so far, object by object in the order they were
// first seen, and then with each new entry as it is recorded, until the returned function is
// called; after that returns, fn is not called again. fn is called with the recorder locked:
// it must be quick and must not call the recorder. It serves views that must see every
// change as it happens, such as a live display.
func (r *Recorder[S]) Follow(fn func(name string, e Entry[S])) (unfollow func()) {
	f := &follower[S]{fn: fn}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, name := range r.names {
		for _, e := range r.entries[name] {
			fn(name, e)
		}
	}
	r.followers = append(r.followers, f)
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.followers = slices.DeleteFunc(r.followers, func(g *follower[S]) bool { return g == f })
	}
}

// Entries returns the entries of the object, oldest first.
func (r *Recorder[S]) Entries(name string) []Entry[S] {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.entries[name])
}

// Latest returns the newest entry of the object.
func (r *Recorder[S]) Latest(name string) (Entry[S], bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	es := r.entries[name]
	if len(es) == 0 {
		return Entry[S]{}, false
	}
	return es[len(es)-1], true
}

// First returns the object's oldest entry for which pred holds.
func (r *Recorder[S]) First(name string, pred func(Entry[S]) bool) (Entry[S], bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return First(r.entries[name], pred)
}

// First returns the oldest of entries for which pred holds.
func First[S any](entries []Entry[S], pred func(Entry[S]) bool) (Entry[S], bool) {
	for _, e := range entries {
		if pred(e) {
			return e, true
		}
	}
	return Entry[S]{}, false
}

// Names returns the names of the objects seen, in the order they were first seen.
func (r *Recorder[S]) Names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.names)
}

// Relists returns how often the watch had to list again, missing the versions in between.
func (r *Recorder[S]) Relists() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.relists
}

// Wait waits until cond holds of the object's entries, checking at every new entry instead
// of polling the API server, and returns them; or returns ctx's error. cond is called with
// the recorder locked: it must not call the recorder or keep the slice.
func (r *Recorder[S]) Wait(ctx context.Context, name string, cond func([]Entry[S]) bool) ([]Entry[S], error) {
	for {
		r.mu.Lock()
		es, changed := r.entries[name], r.changed
		ok := cond(es)
		if ok {
			es = slices.Clone(es)
		}
		r.mu.Unlock()
		if ok {
			return es, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
