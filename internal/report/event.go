package report

import (
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record/util"
)

// makeEvent returns the Event client-go's recorder makes of an emission
// (makeEvent in k8s.io/client-go/tools/events): named after the object it is
// about and the time, in that object's namespace, or in the default one for
// a cluster-scoped object such as the node.
func (r *recorder) makeEvent(regarding, related runtime.Object, eventtype, reason, action, note string) (*eventsv1.Event, error) {
	ref, err := reference(regarding)
	if err != nil {
		return nil, fmt.Errorf("could not refer to the object of the Event: %w", err)
	}
	var relatedRef *corev1.ObjectReference
	if related != nil {
		// client-go leaves out a related object it cannot refer to and
		// keeps the Event.
		relatedRef, _ = reference(related)
	}
	if !util.ValidateEventType(eventtype) {
		return nil, fmt.Errorf("unsupported event type %q", eventtype)
	}
	now := r.now()
	namespace := ref.Namespace
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	return &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      util.GenerateEventName(ref.Name, now.UnixNano()),
			Namespace: namespace,
		},
		EventTime:           metav1.MicroTime{Time: now},
		ReportingController: r.controller,
		ReportingInstance:   r.instance,
		Action:              action,
		Reason:              reason,
		Regarding:           *ref,
		Related:             relatedRef,
		Note:                note,
		Type:                eventtype,
	}, nil
}

// reference returns the reference to obj that client-go's
// reference.GetReference makes. A typed object leaves its kind out, and
// client-go finds it in its scheme, which holds every API group; the agent's
// Events are about the node, so the Node's kind is the one known here, and
// any other object must carry its own.
func reference(obj runtime.Object) (*corev1.ObjectReference, error) {
	if obj == nil {
		return nil, errors.New("can't reference a nil object")
	}
	if ref, ok := obj.(*corev1.ObjectReference); ok {
		return ref, nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Empty() {
		if _, ok := obj.(*corev1.Node); !ok {
			return nil, fmt.Errorf("no kind for %T", obj)
		}
		gvk = corev1.SchemeGroupVersion.WithKind("Node")
	}
	return &corev1.ObjectReference{
		Kind:            gvk.Kind,
		APIVersion:      gvk.GroupVersion().String(),
		Name:            m.GetName(),
		Namespace:       m.GetNamespace(),
		UID:             m.GetUID(),
		ResourceVersion: m.GetResourceVersion(),
	}, nil
}

// seriesPatch returns the strategic merge patch client-go writes a series
// with (createPatchBytesForSeries): from the Event without its series to the
// Event, which is the series alone.
func seriesPatch(ev *eventsv1.Event) ([]byte, error) {
	return json.Marshal(struct {
		Series *eventsv1.EventSeries `json:"series"`
	}{ev.Series})
}
