package agent

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeready/nodeready/internal/config"
	"github.com/nodeready/nodeready/internal/report"
)

// TestFinalScrapeFitsTheGracePeriod: the longest wait for the final scrape the agent accepts
// is what the pod has after the SIGTERM, less the server's shutdown, the Events' last flush
// and the exit margin.
func TestFinalScrapeFitsTheGracePeriod(t *testing.T) {
	assert.Equal(t, report.FinalScrapeBudget(), config.MaxFinalScrapeTimeout)
}

// TestFinalScrape: with METRICS_FINAL_SCRAPE_TIMEOUT, a released node's agent stays after its
// SIGTERM until a scrape has read its final numbers (a scrape before the release does not
// count), and ends as soon as one has; with no scrape it ends at the timeout; an agent whose
// checks a SIGTERM aborts, with no final numbers, does not wait.
func TestFinalScrape(t *testing.T) {
	t.Run("waits for a scrape of the final numbers, then ends", func(t *testing.T) {
		port := freePort(t)
		node := heldNode()
		node.CreationTimestamp = metav1.NewTime(time.Now().Add(-5 * time.Second).Truncate(time.Second))
		c := newCluster(node)
		r := prepare(t, newAgent(t, Clients{Kube: c.kube()}, passing, map[string]string{"METRICS_PORT": port, "METRICS_FINAL_SCRAPE_TIMEOUT": "20s"}))
		c.onRelease(r.sigterm)
		r.start()
		<-r.ctx.Done() // the release brought the SIGTERM
		waitFor(t, "verified", func() bool { return isVerified(r.Agent) })

		assert.Never(t, r.returned, 500*time.Millisecond, 50*time.Millisecond, "ended before a scrape read the final numbers")
		code, body, err := get(t, port, "/metrics")
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, code)
		assert.Contains(t, body, "nodeready_verified 1\n")
		assert.Regexp(t, `\nnodeready_hold_seconds [5-9]`, body)
		require.NoError(t, r.within(t, 5*time.Second), "ended once the final numbers were scraped")
	})

	t.Run("a scrape before the release is not the final one", func(t *testing.T) {
		port := freePort(t)
		c := newCluster(heldNode())
		srv, dns := dnsServer(t)
		srv.SetBroken(true)
		r := prepare(t, newAgent(t, Clients{Kube: c.kube()}, dns, map[string]string{"CHECKS": "dns", "METRICS_PORT": port, "METRICS_FINAL_SCRAPE_TIMEOUT": "20s"}))
		c.onRelease(r.sigterm)
		r.start()
		serving(t, port)
		waitFor(t, "a round", func() bool { return rounds(r.Agent) >= 1 })
		_, body, err := get(t, port, "/metrics")
		require.NoError(t, err)
		assert.Contains(t, body, "nodeready_verified 0\n")

		srv.SetBroken(false)
		<-r.ctx.Done()
		assert.Never(t, r.returned, 500*time.Millisecond, 50*time.Millisecond, "took a scrape before the release for the final one")
		_, body, err = get(t, port, "/metrics")
		require.NoError(t, err)
		assert.Contains(t, body, "nodeready_verified 1\n")
		require.NoError(t, r.within(t, 5*time.Second))
	})

	t.Run("ends at the timeout when nothing scrapes", func(t *testing.T) {
		c := newCluster(heldNode())
		r := prepare(t, newAgent(t, Clients{Kube: c.kube()}, passing, map[string]string{"METRICS_FINAL_SCRAPE_TIMEOUT": "1s"}))
		var sigterm time.Time
		c.onRelease(func() { sigterm = time.Now(); r.sigterm() })
		r.start()
		<-r.ctx.Done()
		require.NoError(t, r.within(t, 10*time.Second))
		assert.GreaterOrEqual(t, time.Since(sigterm), time.Second, "did not wait for a scrape")
		assert.True(t, isVerified(r.Agent))
	})

	t.Run("an aborted agent does not wait", func(t *testing.T) {
		r := runNew(t, newCluster(heldNode()), failing, map[string]string{"METRICS_FINAL_SCRAPE_TIMEOUT": "20s"})
		waitFor(t, "a round", func() bool { return rounds(r.Agent) >= 1 })
		r.abort(t)
	})
}
