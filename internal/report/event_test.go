package report

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clientgoreference "k8s.io/client-go/tools/reference"

	"github.com/nodeready/nodeready/internal/wellknown"
)

// TestEventAsClientGoWritesIt: the Event written is the one client-go's recorder writes of
// the same emission: named after the node and the time in hex nanoseconds, in the default
// namespace, from the agent's controller on this host, about the node as client-go refers
// to it. Only its name and time differ, being of another moment.
func TestEventAsClientGoWritesIt(t *testing.T) {
	client, sent := recordingClient()
	before := time.Now()
	evs, shutdown := NewEvents(eventsOf(client), "node-a", zerolog.Nop(), 2*time.Second)
	evs.Eventf(wellknown.Verified, "All %d checks passed", 4)
	shutdown()
	after := time.Now()
	sent.mu.Lock()
	require.Len(t, sent.created, 1)
	got := sent.created[0]
	sent.mu.Unlock()

	name, hex, ok := strings.Cut(got.Name, ".")
	require.True(t, ok, got.Name)
	assert.Equal(t, "node-a", name)
	nanos, err := strconv.ParseInt(hex, 16, 64)
	require.NoError(t, err, got.Name)
	assert.WithinRange(t, time.Unix(0, nanos), before, after)
	assert.WithinRange(t, got.EventTime.Time, before, after)
	assert.Equal(t, metav1.NamespaceDefault, got.Namespace)
	assert.Equal(t, wellknown.AgentController, got.ReportingController)
	hostname, err := os.Hostname()
	require.NoError(t, err)
	assert.Equal(t, wellknown.AgentController+"-"+hostname, got.ReportingInstance)
	assert.Equal(t, corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: "node-a", UID: "node-a"}, got.Regarding)
	ref, err := clientgoreference.GetReference(scheme.Scheme, nodeRef("node-a"))
	require.NoError(t, err)
	assert.Equal(t, *ref, got.Regarding, "client-go refers to the node so")
	assert.Nil(t, got.Related)
	assert.Nil(t, got.Series)
	assert.Equal(t, [4]string{corev1.EventTypeNormal, "Verified", "Release", "All 4 checks passed"},
		[4]string{got.Type, got.Reason, got.Action, got.Note})

	theirs, theirSent := recordingClient()
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: theirs.EventsV1()})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, b.StartRecordingToSinkWithContext(ctx))
	defer b.Shutdown()
	b.NewRecorder(scheme.Scheme, wellknown.AgentController).
		Eventf(nodeRef("node-a"), nil, corev1.EventTypeNormal, "Verified", "Release", "All %d checks passed", 4)
	waitFor(t, "client-go's Event", func() bool { return len(theirSent.notes("Verified")) == 1 })
	theirSent.mu.Lock()
	want := theirSent.created[0].DeepCopy()
	theirSent.mu.Unlock()
	wantName, _, _ := strings.Cut(want.Name, ".")
	assert.Equal(t, wantName, name)
	want.Name, want.EventTime = got.Name, got.EventTime
	assert.Equal(t, want, got)
}
