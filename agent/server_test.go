package agent

import (
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodeready/nodeready/internal/config"
)

// get returns the status and body of a GET of the agent's server on port.
func get(t *testing.T, port, path string) (int, string, error) {
	t.Helper()
	resp, err := http.Get("http://127.0.0.1:" + port + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// serving waits until the agent's server on port answers.
func serving(t *testing.T, port string) {
	t.Helper()
	waitFor(t, "the server answers", func() bool { _, _, err := get(t, port, "/healthz"); return err == nil })
}

// TestProbesAndMetrics: /healthz answers while the agent runs, /readyz once the node is
// verified, and /metrics tells the rounds.
func TestProbesAndMetrics(t *testing.T) {
	srv, dns := dnsServer(t)
	srv.SetBroken(true)
	port := freePort(t)
	r := runNew(t, newCluster(heldNode()), dns, map[string]string{"CHECKS": "dns", "METRICS_PORT": port})

	serving(t, port)
	waitFor(t, "a round", func() bool { return rounds(r.Agent) >= 1 })
	code, _, err := get(t, port, "/healthz")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, code)
	code, _, err = get(t, port, "/readyz")
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, code, "ready before verification")
	code, body, err := get(t, port, "/metrics")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, code)
	assert.Regexp(t, `nodeready_checks_total\{check="dns",result="fail"\} [1-9]`, body)
	for _, name := range []string{`nodeready_build_info{goversion="`, "nodeready_check_duration_seconds_bucket", "go_goroutines"} {
		assert.Contains(t, body, name)
	}

	srv.SetBroken(false)
	waitFor(t, "verified", func() bool { return isVerified(r.Agent) })
	code, _, err = get(t, port, "/readyz")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, code)
}

// TestMetricsServerOffKeepsProbes: ENABLE_METRICS=false turns /metrics off, not the probes.
func TestMetricsServerOffKeepsProbes(t *testing.T) {
	port := freePort(t)
	runNew(t, newCluster(heldNode()), failing, map[string]string{"ENABLE_METRICS": "false", "METRICS_PORT": port})

	serving(t, port)
	for path, want := range map[string]int{"/healthz": http.StatusOK, "/metrics": http.StatusNotFound} {
		code, _, err := get(t, port, path)
		require.NoError(t, err)
		assert.Equal(t, want, code, path)
	}
}

// TestProbesAnsweredThroughTheSettleWindow: the release brings the SIGTERM (the DaemonSet
// controller deletes the pod at once) while the agent still settles; the liveness probe is
// answered until Run returns, so a healthy verification leaves no Unhealthy Event.
func TestProbesAnsweredThroughTheSettleWindow(t *testing.T) {
	port := freePort(t)
	c := newCluster(heldNode())
	r := prepare(t, newAgent(t, Clients{Kube: c.kube()}, passing, map[string]string{"METRICS_PORT": port, "SETTLE_TIME": config.MaxSettleTime.String()}))
	c.onRelease(r.sigterm)
	r.start()

	<-r.ctx.Done()
	// The settle window goes on after the SIGTERM: the taint put back is removed again.
	waitFor(t, "released", func() bool { return c.requests("patch", "") == 1 && len(c.node(t).Spec.Taints) == 1 })
	c.editNode(t, func(n *corev1.Node) { n.Spec.Taints = heldNode().Spec.Taints })
	var failed atomic.Int32
	waitFor(t, "the taint removed again", func() bool {
		if code, _, err := get(t, port, "/healthz"); err != nil || code != http.StatusOK {
			failed.Add(1)
		}
		return c.requests("patch", "") == 2 && len(c.node(t).Spec.Taints) == 1
	})
	assert.Zero(t, failed.Load(), "the health server stopped answering after the SIGTERM")
	assert.False(t, r.returned())

	// The node's deletion ends the settle window, and Run returns.
	c.deleteNode(t)
	require.NoError(t, r.stop(t))
	assert.True(t, isVerified(r.Agent))
}
