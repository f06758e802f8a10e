package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// serve starts the health and metrics server and returns once it listens,
// so a port in use fails the start instead of a probe later. It stops when
// ctx ends.
//
// /healthz is the liveness probe: the process is up. /readyz tells whether
// the node is verified, for people and scrapers; the DaemonSet has no
// readiness probe (manifests/03-daemonset.yaml says why).
func (a *Agent) serve(ctx context.Context) (addr string, err error) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !a.verified.Load() {
			http.Error(w, "node not verified yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	if a.cfg.EnableMetrics {
		mux.Handle("GET /metrics", a.metrics.final.instrument(promhttp.HandlerFor(a.metrics.registry, promhttp.HandlerOpts{Registry: a.metrics.registry})))
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(int(a.cfg.MetricsPort))))
	if err != nil {
		return "", fmt.Errorf("listen for metrics and probes (METRICS_PORT): %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	a.metrics.final.shutdown = srv.Shutdown
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error().Err(err).Msg("Metrics server stopped")
		}
	}()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	return ln.Addr().String(), nil
}
