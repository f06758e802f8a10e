package agent

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
)

// reportingController names nodeready as the source of its Events.
const reportingController = "nodeready.io/agent"

// newRecorder returns client-go's events.k8s.io recorder (which aggregates
// repeated Events into series) and its shutdown. Events about a Node are
// stored in the default namespace.
func newRecorder(client kubernetes.Interface) (events.EventRecorder, func()) {
	if client == nil {
		return &events.FakeRecorder{}, nil
	}
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
	ctx, cancel := context.WithCancel(context.Background())
	_ = b.StartRecordingToSinkWithContext(ctx)
	return b.NewRecorder(scheme.Scheme, reportingController), func() {
		b.Shutdown()
		cancel()
	}
}

// nodeRef is what the Events are about. Its UID is the node's name, the
// convention the kubelet uses for node Events, so `kubectl describe node`
// shows them without the agent reading the node's real UID first.
func nodeRef(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name)}}
}
