package report

import (
	"bytes"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeready/nodeready/internal/wellknown"
)

// TestEventsAboutTheNode: an Event is about the node (its name as UID, as the
// kubelet's), from nodeready, with the type and action of its reason.
func TestEventsAboutTheNode(t *testing.T) {
	client, sent := recordingClient()
	evs, shutdown := NewEvents(eventsOf(client), "node-a", zerolog.Nop(), 2*time.Second)
	evs.Eventf(wellknown.Verified, "All %d checks passed", 4)
	evs.Eventf(wellknown.ReleaseFailed, "patch node node-a: forbidden")
	shutdown()

	sent.mu.Lock()
	defer sent.mu.Unlock()
	require.Len(t, sent.created, 2)
	got := map[string][3]string{}
	for _, e := range sent.created {
		assert.Equal(t, "Node", e.Regarding.Kind)
		assert.Equal(t, "node-a", e.Regarding.Name)
		assert.Equal(t, types.UID("node-a"), e.Regarding.UID)
		assert.Equal(t, wellknown.AgentController, e.ReportingController)
		got[e.Reason] = [3]string{e.Type, e.Action, e.Note}
	}
	assert.Equal(t, map[string][3]string{
		"Verified":      {corev1.EventTypeNormal, "Release", "All 4 checks passed"},
		"ReleaseFailed": {corev1.EventTypeWarning, "Release", "patch node node-a: forbidden"},
	}, got)
}

// TestLogEventsWritesNothing: DRY_RUN=true logs each Event it would emit.
func TestLogEventsWritesNothing(t *testing.T) {
	var logs bytes.Buffer
	LogEvents("node-a", zerolog.New(&logs)).Eventf(wellknown.CheckFailed, "%s", "dns a.example: no such host")
	assert.JSONEq(t, `{"level":"info","type":"Warning","reason":"CheckFailed","action":"Verify",
		"note":"dns a.example: no such host","message":"Would emit Event (DRY_RUN=true)"}`, logs.String())
}
