package agent

import (
	"context"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
)

// reportingController names nodeready as the source of its Events.
const reportingController = "nodeready.io/agent"

// flushBudget bounds the wait for Events still on their way at exit.
const flushBudget = 2 * time.Second

// newRecorder returns client-go's events.k8s.io recorder (which aggregates
// repeated Events into series) and its shutdown. Events about a Node are
// stored in the default namespace. The recorder writes from goroutines of
// its own, and the Verified Event is emitted moments before the SIGTERM that
// ends the process, so the shutdown waits, bounded, until every Event handed
// to the recorder has been written (or its first write has failed).
func newRecorder(client kubernetes.Interface) (events.EventRecorder, func()) {
	if client == nil {
		return &events.FakeRecorder{}, nil
	}
	var emitted, written atomic.Int64
	sink := &countingSink{EventSink: &events.EventSinkImpl{Interface: client.EventsV1()}, written: &written}
	b := events.NewBroadcaster(sink)
	ctx, cancel := context.WithCancel(context.Background())
	_ = b.StartRecordingToSinkWithContext(ctx)
	recorder := &countingRecorder{EventRecorder: b.NewRecorder(scheme.Scheme, reportingController), emitted: &emitted}
	return recorder, func() {
		_ = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, flushBudget, true, func(context.Context) (bool, error) {
			return written.Load() >= emitted.Load(), nil
		})
		b.Shutdown()
		cancel()
	}
}

// countingRecorder counts the Events handed to the recorder.
type countingRecorder struct {
	events.EventRecorder
	emitted *atomic.Int64
}

func (r *countingRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	r.emitted.Add(1)
	r.EventRecorder.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

// countingSink counts the Events the sink has created, or failed to. An
// Event repeated into a series is not created again; the bounded wait covers it.
type countingSink struct {
	events.EventSink
	written *atomic.Int64
}

func (s *countingSink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	defer s.written.Add(1)
	return s.EventSink.Create(ctx, e)
}

// nodeRef is what the Events are about. Its UID is the node's name, the
// convention the kubelet uses for node Events, so `kubectl describe node`
// shows them without the agent reading the node's real UID first.
func nodeRef(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name)}}
}
