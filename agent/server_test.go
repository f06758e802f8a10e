package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// settlingNode is a node whose settle window lasts until the test ends it.
type settlingNode struct {
	*fakeNode
	settling chan struct{} // closed when Settle starts
	end      chan struct{} // closing it ends Settle
}

func (n *settlingNode) Settle(context.Context, time.Duration) (int, error) {
	close(n.settling)
	<-n.end
	return 0, nil
}

// loggedAddress is the health server's address from the agent's start log line.
func loggedAddress(t *testing.T, logs *syncBuffer) string {
	t.Helper()
	for line := range strings.Lines(logs.String()) {
		var rec struct{ Address string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Address != "" {
			return rec.Address
		}
	}
	t.Fatal("no address logged")
	return ""
}

// TestProbesAnsweredThroughTheSettleWindow: the release brings the SIGTERM (the DaemonSet
// controller deletes the pod at once) while the agent still settles; the liveness probe is
// answered until Run returns, so a healthy verification leaves no Unhealthy Event.
func TestProbesAnsweredThroughTheSettleWindow(t *testing.T) {
	node := &settlingNode{fakeNode: &fakeNode{}, settling: make(chan struct{}), end: make(chan struct{})}
	a := testAgent(t, node, &fakeCheck{name: "dns"})
	logs := &syncBuffer{}
	a.log = zerolog.New(logs)
	cancel, done := runAgent(t, a)

	<-node.settling
	cancel() // the SIGTERM
	// Time for a server that stops at the SIGTERM to do so; the agent is still settling.
	time.Sleep(200 * time.Millisecond)
	resp, err := http.Get("http://" + loggedAddress(t, logs) + "/healthz")
	require.NoError(t, err, "the health server still answers after the SIGTERM")
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	close(node.end)
	require.NoError(t, <-done)
}
