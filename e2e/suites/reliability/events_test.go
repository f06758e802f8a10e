package reliability

import (
	"context"
	"slices"
	"testing"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// nodeEvents returns the agents' Events about the nodes with one of the reasons (any reason
// when none is given). Events about a Node are stored in the default namespace.
func nodeEvents(t *testing.T, ctx context.Context, client kubernetes.Interface, nodes []string, reasons ...string) []eventsv1.Event {
	t.Helper()
	list, err := client.EventsV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	var out []eventsv1.Event
	for _, ev := range list.Items {
		if ev.Regarding.Kind != "Node" || !slices.Contains(nodes, ev.Regarding.Name) {
			continue
		}
		if len(reasons) > 0 && !slices.Contains(reasons, ev.Reason) {
			continue
		}
		out = append(out, ev)
	}
	return out
}

// failureReasons are the Events of a recorded failure.
var failureReasons = []string{"CheckFailed", "VerificationFailed", "FailedOpen", "ReplacingNode", "ReplaceFailed", "ReleaseFailed"}
