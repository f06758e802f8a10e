package agent

import (
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/nodeready/nodeready/checks"
)

// metrics live on the agent's own registry, so a process runs exactly the
// collectors below and tests can run several agents side by side. Label
// values come from closed sets only: check names and fixed results, never an
// error text, address or URL.
type metrics struct {
	registry       *prometheus.Registry
	checkDuration  *prometheus.HistogramVec
	checkSuccess   *prometheus.GaugeVec
	checksTotal    *prometheus.CounterVec
	rounds         prometheus.Counter
	failures       prometheus.Counter
	patches        *prometheus.CounterVec
	verified       prometheus.Gauge
	timeToVerified prometheus.Gauge
	misconfigured  prometheus.Gauge
	shared         *prometheus.GaugeVec
	// hold is the node's hold time; final tells when a scrape has read the
	// final numbers (METRICS_FINAL_SCRAPE_TIMEOUT).
	hold  *hold
	final *finalScrape
}

// BuildInfo identifies the binary; main sets it from -ldflags.
type BuildInfo struct {
	Version, Revision string
}

// newMetrics makes the agent's metrics; started is the agent's first start in
// its pod, from which a re-verification's hold counts.
func newMetrics(build BuildInfo, started time.Time) *metrics {
	m := &metrics{
		hold:     newHold(started),
		final:    newFinalScrape(),
		registry: prometheus.NewRegistry(),
		checkDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "nodeready_check_duration_seconds",
			Help:    "Duration of one check against one target.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 9), // 1 ms to about 65 s
		}, []string{"check"}),
		checkSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "nodeready_check_success",
			Help: "Whether every target of the check passed in the last round (1) or not (0).",
		}, []string{"check"}),
		checksTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodeready_checks_total",
			Help: "Checks run, by check and result (pass or fail).",
		}, []string{"check", "result"}),
		rounds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nodeready_rounds_total",
			Help: "Rounds of checks run.",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nodeready_verification_failures_total",
			Help: "Times the retries or the initial timeout ran out with checks still failing.",
		}),
		patches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodeready_node_patches_total",
			Help: "Attempts to release the node, by result (patched, unchanged or error).",
		}, []string{"result"}),
		verified: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nodeready_verified",
			Help: "Whether this agent has verified and released its node (1) or not (0).",
		}),
		timeToVerified: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nodeready_time_to_verified_seconds",
			Help: "Time from the agent's start to the confirmed release of its node.",
		}),
		misconfigured: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nodeready_misconfigured",
			Help: "Whether the latest round found the cluster or the configuration in the way (a check no node could pass, a refused release) (1) or not (0).",
		}),
		shared: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "nodeready_shared_fault",
			Help: "Whether the failure action due for the check's failure is withheld because the fault looks shared by the fleet (1) or not (0).",
		}, []string{"check"}),
	}
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "nodeready_build_info",
		Help:        "Build information of the running agent; the value is always 1.",
		ConstLabels: prometheus.Labels{"version": build.Version, "revision": build.Revision, "goversion": runtime.Version()},
	})
	buildInfo.Set(1)
	m.registry.MustRegister(m.checkDuration, m.checkSuccess, m.checksTotal, m.rounds, m.failures,
		m.patches, m.verified, m.timeToVerified, m.misconfigured, m.shared, m.hold, buildInfo,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// released records the release, at: the hold ends there.
func (m *metrics) released(at time.Time) { m.hold.released(at) }

// finalNumbers marks the numbers final: the node is released and
// nodeready_verified is 1. A scrape from now on is the final scrape.
func (m *metrics) finalNumbers() { m.final.final.Store(true) }

// recordRound records the results of one completed round.
func (m *metrics) recordRound(results []checks.Result) {
	m.rounds.Inc()
	success := map[string]bool{}
	for _, r := range results {
		if r.Skipped() {
			continue
		}
		m.checkDuration.WithLabelValues(r.Name).Observe(r.Duration.Seconds())
		m.checksTotal.WithLabelValues(r.Name, r.Status()).Inc()
		if _, seen := success[r.Name]; !seen {
			success[r.Name] = true
		}
		success[r.Name] = success[r.Name] && r.Passed()
	}
	for name, ok := range success {
		v := 0.0
		if ok {
			v = 1
		}
		m.checkSuccess.WithLabelValues(name).Set(v)
	}
}

// sharedFault records whether the failure action due for the failing checks is
// withheld for a fault that looks shared.
func (m *metrics) sharedFault(failing []string, withheld bool) {
	m.shared.Reset()
	if withheld {
		for _, c := range failing {
			m.shared.WithLabelValues(c).Set(1)
		}
	}
}
