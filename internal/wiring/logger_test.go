package wiring

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeready/nodeready/internal/config"
)

// TestLoggerBindsTheRun: every line is JSON at LOG_LEVEL and names the node
// and the pod, as the bench's parser and people's queries expect.
func TestLoggerBindsTheRun(t *testing.T) {
	var out bytes.Buffer
	log := NewLogger(config.Config{LogLevel: "warn", LogFormat: "json", NodeName: "node-a", PodName: "nodeready-x", PodNamespace: "kube-system"}, &out)
	log.Info().Msg("Started verification")
	log.Warn().Msg("Could not read the node, will try again")

	var line map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &line), "one line: the info one is below LOG_LEVEL")
	assert.Equal(t, "node-a", line["node"])
	assert.Equal(t, "kube-system/nodeready-x", line["pod"])
	assert.Equal(t, "Could not read the node, will try again", line["message"])
	assert.Contains(t, line, "time")
}
