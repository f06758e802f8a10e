package security

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// agentController is the reporting controller of the agent's Events (agent/events.go).
const agentController = "nodeready.io/agent"

// event is an events.k8s.io Event about node from controller, as a recorder writes it.
// An empty name is generated.
func event(name, node, controller, reason string) *eventsv1.Event {
	return &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: name, GenerateName: "nodeready-", Namespace: metav1.NamespaceDefault},
		EventTime:           metav1.NewMicroTime(time.Now()),
		ReportingController: controller,
		ReportingInstance:   controller + "-x",
		Action:              "Verify",
		Reason:              reason,
		Regarding:           corev1.ObjectReference{Kind: "Node", Name: node, APIVersion: "v1"},
		Note:                "note",
		Type:                corev1.EventTypeWarning,
	}
}

// TestAgentSpeaksOnlyForItsOwnNode: the Events Role lets the agent create and patch Events
// in default, about anything; the own-events policy keeps its pod-bound token to Events about
// its own node that name nodeready as the reporter, and away from anyone else's Events.
func TestAgentSpeaksOnlyForItsOwnNode(t *testing.T) {
	cp, admin, nodeA, nodeB, agentA := twoNodes(t)
	ctx := t.Context()
	events := func(c kubernetes.Interface) func(context.Context, *eventsv1.Event) error {
		return func(ctx context.Context, e *eventsv1.Event) error {
			_, err := c.EventsV1().Events(metav1.NamespaceDefault).Create(ctx, e, metav1.CreateOptions{})
			return err
		}
	}

	// The policy loads in the background: until it refuses a Warning about node B.
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		last = events(agentA)(ctx, event("", nodeB, agentController, "Canary"))
		if last == nil {
			return false, nil
		}
		return apierrors.IsForbidden(last) && strings.Contains(last.Error(), "nodeready: Event refused"), nil
	})
	require.NoError(t, err, "the own-events policy did not come into force; last %v", last)

	// A kubelet's Event on node A, which the agent must not rewrite.
	kubeletEvent, err := admin.EventsV1().Events(metav1.NamespaceDefault).Create(ctx, event("kubelet-a", nodeA, "kubelet", "NodeReady"), metav1.CreateOptions{})
	require.NoError(t, err)

	for _, tc := range []struct {
		name  string
		event *eventsv1.Event
		want  string
	}{
		{"a Warning about another node", event("", nodeB, agentController, "VerificationFailed"), "may report only about its own node, not about Node node-b"},
		{"a Verified about another node", event("", nodeB, agentController, "Verified"), "may report only about its own node"},
		{"about its own node as another reporter", event("", nodeA, "kubelet", "NodeNotReady"), "reports as nodeready.io/agent, not as kubelet"},
		{"about a pod", func() *eventsv1.Event {
			e := event("", "x", agentController, "Verified")
			e.Regarding = corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "x"}
			return e
		}(), "not about Pod x"},
	} {
		t.Run("create "+tc.name, func(t *testing.T) {
			err := events(agentA)(ctx, tc.event)
			require.Error(t, err)
			assert.True(t, apierrors.IsForbidden(err), "want 403, got %v", err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	t.Run("patch a kubelet Event", func(t *testing.T) {
		// A series update, as a recorder sends for a repeated Event: the fields it may change.
		_, err := agentA.EventsV1().Events(metav1.NamespaceDefault).Patch(ctx, kubeletEvent.Name, types.MergePatchType,
			[]byte(`{"series":{"count":99,"lastObservedTime":"`+time.Now().UTC().Format("2006-01-02T15:04:05.000000Z")+`"}}`), metav1.PatchOptions{})
		require.Error(t, err)
		assert.True(t, apierrors.IsForbidden(err), "want 403, got %v", err)
		assert.Contains(t, err.Error(), "reports as nodeready.io/agent, not as kubelet")
		got, err := admin.EventsV1().Events(metav1.NamespaceDefault).Get(ctx, kubeletEvent.Name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Nil(t, got.Series)
	})
	t.Run("its own Events about its own node, and their series", func(t *testing.T) {
		own, err := agentA.EventsV1().Events(metav1.NamespaceDefault).Create(ctx, event("own-a", nodeA, agentController, "CheckFailed"), metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = agentA.EventsV1().Events(metav1.NamespaceDefault).Patch(ctx, own.Name, types.MergePatchType,
			[]byte(`{"series":{"count":2,"lastObservedTime":"`+time.Now().UTC().Format("2006-01-02T15:04:05.000000Z")+`"}}`), metav1.PatchOptions{})
		require.NoError(t, err)
	})
	t.Run("a token without a node", func(t *testing.T) {
		plain := plainClient(t, cp)
		err := events(plain)(ctx, event("", nodeA, agentController, "Verified"))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "the token names no node")
	})
}
