package agent

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nodeready/nodeready/internal/report"
)

// finalScrape keeps a released node's agent, after its SIGTERM, until a
// scrape has read its final numbers (METRICS_FINAL_SCRAPE_TIMEOUT). The
// DaemonSet controller deletes the pod as soon as the release's label lands,
// and the pod ends a settle window later (2 s by default): at a 15 s scrape
// interval most agents would end unscraped, their node's hold time lost. The
// wait begins after the release and the SIGTERM, so it never delays either,
// and it ends by a deadline counted from the SIGTERM, inside the grace period.
type finalScrape struct {
	// final is set once the numbers are final: the node is released and
	// nodeready_verified is 1.
	final atomic.Bool
	// scraped is closed once a scrape that began after final was answered.
	scraped chan struct{}
	once    sync.Once
	// shutdown stops the metrics server, letting a scrape under way finish.
	shutdown func(context.Context) error
}

func newFinalScrape() *finalScrape { return &finalScrape{scraped: make(chan struct{})} }

// instrument wraps the /metrics handler: a request that began once the
// numbers were final, answered, is the final scrape.
func (f *finalScrape) instrument(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		final := f.final.Load()
		h.ServeHTTP(w, r)
		if final && r.Context().Err() == nil {
			f.once.Do(func() { close(f.scraped) })
		}
	})
}

// whenDone returns a function that tells when ctx ended: the SIGTERM.
// The wait for the final scrape counts from it, as the grace period does.
func whenDone(ctx context.Context) func() time.Time {
	var at atomic.Int64
	context.AfterFunc(ctx, func() { at.Store(time.Now().UnixNano()) })
	return func() time.Time {
		if n := at.Load(); n != 0 {
			return time.Unix(0, n)
		}
		return time.Now()
	}
}

// awaitFinalScrape waits, on a released node, for the final scrape: at most
// METRICS_FINAL_SCRAPE_TIMEOUT from the SIGTERM (stopped), which has ended
// ctx already. Then it stops the metrics server, which lets the scrape's
// answer finish being written.
func (a *Agent) awaitFinalScrape(ctx context.Context, stopped time.Time) {
	f := a.metrics.final
	if !a.cfg.EnableMetrics || a.cfg.FinalScrapeTimeout <= 0 || !f.final.Load() || f.shutdown == nil {
		return
	}
	timer := time.NewTimer(time.Until(stopped.Add(a.cfg.FinalScrapeTimeout)))
	defer timer.Stop()
	select {
	case <-f.scraped:
		a.log.Info().Float64("duration_seconds", time.Since(stopped).Seconds()).Msg("Final metrics scraped")
	case <-timer.C:
		a.log.Info().Dur("timeout", a.cfg.FinalScrapeTimeout).Msg("No scrape read the final metrics in METRICS_FINAL_SCRAPE_TIMEOUT, stopped waiting")
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), report.ServerStopBudget)
	defer cancel()
	_ = f.shutdown(ctx)
}
