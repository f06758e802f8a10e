package report

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeready/nodeready/internal/wellknown"
)

// EventClient writes events.k8s.io/v1 Events: a clientset's
// EventsV1().Events(metav1.NamespaceDefault). The default namespace is where
// the Events about a cluster-scoped object, such as the node, are kept.
type EventClient interface {
	Create(ctx context.Context, event *eventsv1.Event, opts metav1.CreateOptions) (*eventsv1.Event, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*eventsv1.Event, error)
}

// EventRecorder emits Events, with the method of client-go's
// events.EventRecorder: the agent's recorder (newRecorder), one that logs
// them (LogEvents), or one that keeps them, in tests.
type EventRecorder interface {
	Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// Events emits the Events about one node.
type Events struct {
	rec  EventRecorder
	node *corev1.Node
}

// NewEvents returns the Events about node, written through client (see
// newRecorder), and the shutdown that waits, bounded, for those still on
// their way; call it when the agent ends. settle is SETTLE_TIME, part of the
// release's budget, which bounds an Event that matters (mustSendBudget).
// Without a client the Events go nowhere and there is no shutdown.
func NewEvents(client EventClient, node string, log zerolog.Logger, settle time.Duration) (*Events, func()) {
	rec, shutdown := newRecorder(client, log, mustSendBudget(settle))
	return EventsTo(rec, node), shutdown
}

// LogEvents logs each Event about node instead of emitting it, for
// DRY_RUN=true.
func LogEvents(node string, log zerolog.Logger) *Events {
	return EventsTo(logRecorder{log: log}, node)
}

// EventsTo emits the Events about node through rec: client-go's FakeRecorder
// in tests.
func EventsTo(rec EventRecorder, node string) *Events {
	return &Events{rec: rec, node: nodeRef(node)}
}

// Eventf emits an Event of reason, with its type and action (kinds), about
// the node.
func (e *Events) Eventf(reason wellknown.Reason, note string, args ...any) {
	k := kinds[reason]
	e.rec.Eventf(e.node, nil, k.eventType, string(reason), k.action, note, args...)
}

// nodeRef is what the Events are about. Its UID is the node's name, the
// convention the kubelet uses for node Events, so `kubectl describe node`
// shows them without the agent reading the node's real UID first.
func nodeRef(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name)}}
}

// logRecorder logs the Events the agent would emit.
type logRecorder struct{ log zerolog.Logger }

func (r logRecorder) Eventf(_, _ runtime.Object, eventtype, reason, action, note string, args ...any) {
	r.log.Info().Str("type", eventtype).Str("reason", reason).Str("action", action).Str("note", fmt.Sprintf(note, args...)).
		Msg("Would emit Event (DRY_RUN=true)")
}
