package nodepatch

import (
	"context"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// view is the own node as a watch shows it: an informer on a field selector
// on the node's name. Started with the checks, it has the node (and its
// resourceVersion, for the optimistic lock) by the time they pass, so the
// release is one PATCH; the same watch serves the settle window.
//
// Against an API server with streaming lists (WatchList, on by default from
// Kubernetes 1.34) the reflector's first request is one WATCH with
// sendInitialEvents, which brings the node, a bookmark that ends the initial
// state, then every change. Elsewhere it falls back to a list, here a GET of
// the one node (the agent may get and watch nodes, not list them), and a
// WATCH from its resourceVersion. The reflector watches again when a watch
// ends and lists again after 410 Gone or an outage, with its own backoff.
type view struct {
	store  cache.Store
	synced cache.DoneChecker
	// changed holds a value when the node changed since it was last taken.
	changed chan struct{}
	// failed holds a value when a list or watch failed or a watch ended.
	failed chan struct{}
	// live: the last list or watch call succeeded and its watch has not
	// ended; while it is false the node in store may be old.
	live atomic.Bool
	// down: a list or watch call failed and none has succeeded since. A
	// failure is signalled once, so a later taker must not wait for another.
	down atomic.Bool
	// restarts counts the lists and the watches that began with the node as
	// it is (no resourceVersion): after one, the view may skip versions.
	restarts atomic.Int64
	// shown holds the resourceVersions of every version of the node the
	// watch has shown: the store keeps only the latest, and a waiter woken
	// once for several changes sees only that.
	mu    sync.Mutex
	shown map[string]bool
	stop  func()
}

// Watch starts watching the node and returns the function that stops the
// watch. Release, State and Settle then take the node from the watch instead
// of reading it. Calling it again while it watches changes nothing.
func (p *Patcher) Watch(ctx context.Context) (stop func()) {
	if p.view != nil {
		return func() {}
	}
	v := &view{changed: make(chan struct{}, 1), failed: make(chan struct{}, 1), shown: map[string]bool{}}
	selector := fields.OneTermEqualSelector("metadata.name", p.node).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, _ metav1.ListOptions) (runtime.Object, error) {
			node, err := p.client.CoreV1().Nodes().Get(ctx, p.node, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				v.restarted()
				return &corev1.NodeList{}, nil
			case err != nil:
				v.fail()
				return nil, err
			}
			v.restarted()
			return &corev1.NodeList{ListMeta: metav1.ListMeta{ResourceVersion: node.ResourceVersion}, Items: []corev1.Node{*node}}, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = selector
			w, err := p.client.CoreV1().Nodes().Watch(ctx, opts)
			if err != nil {
				v.fail()
				return nil, err
			}
			if opts.ResourceVersion == "" || (opts.SendInitialEvents != nil && *opts.SendInitialEvents) {
				v.restarted()
			} else {
				v.live.Store(true)
				v.down.Store(false)
			}
			return v.track(w), nil
		},
	}
	notify := func(obj any) {
		if node, ok := obj.(*corev1.Node); ok {
			v.mu.Lock()
			v.shown[node.ResourceVersion] = true
			v.mu.Unlock()
		}
		signal(v.changed)
	}
	store, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		// The fake clientset of unit tests cannot stream lists; it says so.
		ListerWatcher: cache.ToListWatcherWithWatchListSemantics(lw, p.client),
		ObjectType:    &corev1.Node{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    notify,
			UpdateFunc: func(_, obj any) { notify(obj) },
			DeleteFunc: notify,
		},
	})
	v.store, v.synced = store, informer.HasSyncedChecker()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		informer.RunWithContext(ctx)
	}()
	// The handlers may run before the informer counts as synced; one more
	// signal once it does, so a waiter that looked too early looks again.
	go func() {
		select {
		case <-v.synced.Done():
			signal(v.changed)
		case <-ctx.Done():
		}
	}()
	var once sync.Once
	v.stop = func() {
		once.Do(func() {
			cancel()
			<-done
			p.view = nil
		})
	}
	p.view = v
	return v.stop
}

// latest returns the node as last seen: from the watch once it has shown
// the node, or read when there is no watch or it is down (a watch that
// failed would otherwise be waited for, and one that is down may show an old
// node). The node an own write answered stands until the watch shows it. A
// node the watch shows older than the stored one for another reason costs
// nothing but a lost optimistic lock, after which Release reads the node.
func (p *Patcher) latest(ctx context.Context) (*corev1.Node, error) {
	v := p.view
	if v == nil {
		return p.get(ctx)
	}
	if v.down.Load() && !isDone(v.synced) {
		return p.get(ctx)
	}
	select {
	case <-v.synced.Done():
	case <-v.failed:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if !v.live.Load() || !isDone(v.synced) {
		return p.get(ctx)
	}
	obj, exists, err := v.store.GetByKey(p.node)
	if err != nil {
		return p.get(ctx)
	}
	if !exists {
		return nil, p.classify("watch", apierrors.NewNotFound(corev1.Resource("nodes"), p.node))
	}
	node := obj.(*corev1.Node)
	if w := p.written; w != nil {
		// Watch events come in the order of the writes, so a watch that has not shown
		// the own write yet shows an older node, unless it began again since (a list or
		// a watch from the node as it is skips versions).
		if !v.hasShown(w.ResourceVersion) && v.restarts.Load() == p.writtenRestarts {
			node = w
		} else {
			p.written = nil
		}
	}
	p.last = node
	return node, nil
}

// wrote keeps node, the answer to an own write, as the node's latest version: the
// watch shows the write only later, and a release planned from the node before it
// would lose its optimistic lock (the condition is written right before the release).
func (p *Patcher) wrote(node *corev1.Node) {
	p.last, p.written = node, node
	if p.view != nil {
		p.writtenRestarts = p.view.restarts.Load()
	}
}

// hasShown reports whether the watch has shown the node at resourceVersion rv.
func (v *view) hasShown(rv string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.shown[rv]
}

// restarted records a list or watch call that began with the node as it is.
func (v *view) restarted() {
	v.restarts.Add(1)
	v.live.Store(true)
	v.down.Store(false)
}

// fail records a failed list or watch call or an ended watch.
func (v *view) fail() {
	v.live.Store(false)
	v.down.Store(true)
	signal(v.failed)
}

// track passes w on and records when it ends or reports an error (410 Gone
// among them): until the reflector has listed or watched again, the node
// the view holds may be old.
func (v *view) track(w watch.Interface) watch.Interface {
	t := &trackedWatch{Interface: w, out: make(chan watch.Event), stopped: make(chan struct{})}
	go func() {
		defer close(t.out)
		defer v.fail()
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				v.fail()
			}
			select {
			case t.out <- ev:
			case <-t.stopped:
				return
			}
		}
	}()
	return t
}

// trackedWatch is a watch whose events pass through track.
type trackedWatch struct {
	watch.Interface
	out     chan watch.Event
	stopped chan struct{}
	once    sync.Once
}

func (w *trackedWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *trackedWatch) Stop() {
	w.once.Do(func() { close(w.stopped) })
	w.Interface.Stop()
}

// signal leaves a value in c unless one is waiting there already.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func isDone(d cache.DoneChecker) bool {
	select {
	case <-d.Done():
		return true
	default:
		return false
	}
}
