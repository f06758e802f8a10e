package agent

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodeready/nodeready/nodepatch"
)

// holdDesc is the node's hold time. An agent lives only while its node is
// held, so it is scraped a few times at most: the value counts up while the
// node is held and stops at the release, so that the last scrape, which
// METRICS_FINAL_SCRAPE_TIMEOUT waits for, reads the whole hold.
var holdDesc = prometheus.NewDesc("nodeready_hold_seconds", holdHelp, nil, nil)

const holdHelp = "How long nodeready has held the node: from its creation (for a node it verified before, from the agent's first start) until now, until the release once released. Only while the node is held or after its release."

// hold is the node's hold as the agent sees it: since when nodeready holds
// the node, and when it released it. A node is held from its creation, as
// the startup taint is put on it at registration; a node nodeready verified
// before carries the taint again only for a re-verification, which the agent
// itself began (REVERIFY_TAINT), so it is held from the agent's first start.
// A node the agent never saw tainted is not held and has no hold time.
type hold struct {
	started time.Time // the agent's first start in its pod
	now     func() time.Time

	mu           sync.Mutex
	since, until time.Time
}

var _ prometheus.Collector = (*hold)(nil)

func newHold(started time.Time) *hold { return &hold{started: started, now: time.Now} }

// saw takes in the node as read: the first read that shows it held sets
// since when. A Karpenter node carries its startup taint only once
// Karpenter registered it, so a read that does not show it held decides
// nothing.
func (h *hold) saw(s nodepatch.State) {
	if !s.Tainted || !s.Registered {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.since.IsZero() {
		return
	}
	h.since = s.Created
	if s.VerifiedBefore || s.Created.IsZero() {
		h.since = h.started
	}
}

// released stops the hold at the release.
func (h *hold) released(at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.since.IsZero() && h.until.IsZero() {
		h.until = at
	}
}

// Describe implements prometheus.Collector.
func (h *hold) Describe(ch chan<- *prometheus.Desc) { ch <- holdDesc }

// Collect implements prometheus.Collector.
func (h *hold) Collect(ch chan<- prometheus.Metric) {
	h.mu.Lock()
	since, until := h.since, h.until
	h.mu.Unlock()
	if since.IsZero() {
		return
	}
	if until.IsZero() {
		until = h.now()
	}
	ch <- prometheus.MustNewConstMetric(holdDesc, prometheus.GaugeValue, max(until.Sub(since), 0).Seconds())
}

// holdReader is the agent's node reader, which also tells the hold what it
// reads of the node: the agent reads its node's state, from its watch, after a
// round with problems and before each release, so no read is added for it.
type holdReader struct {
	nodeReader
	hold *hold
}

// State implements nodeReader.
func (r holdReader) State(ctx context.Context) (nodepatch.State, error) {
	s, err := r.nodeReader.State(ctx)
	if err == nil {
		r.hold.saw(s)
	}
	return s, err
}
