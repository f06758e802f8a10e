package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPercentiles(t *testing.T) {
	var d durations
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(101-i)*time.Millisecond) // unsorted on purpose
	}
	assert.Equal(t, 50*time.Millisecond, d.pct(50))
	assert.Equal(t, 95*time.Millisecond, d.pct(95))
	assert.Equal(t, 99*time.Millisecond, d.pct(99))
	assert.Equal(t, 100*time.Millisecond, d.max())
	assert.Equal(t, 100*time.Millisecond, d[0], "pct must not sort the sample in place")

	one := durations{7 * time.Millisecond}
	assert.Equal(t, 7*time.Millisecond, one.pct(50))
	assert.Equal(t, 7*time.Millisecond, one.pct(99))
	assert.Equal(t, "no samples", durations{}.summary(false))
}

func TestParseMetrics(t *testing.T) {
	body := []byte(`# HELP apiserver_request_total Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="",verb="GET",version="v1"} 12
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="status",verb="PATCH",version="v1"} 3
apiserver_request_total{code="200",component="",dry_run="",group="",resource="",scope="",subresource="/readyz",verb="GET",version=""} 4
process_cpu_seconds_total 1.5e+01
other_metric{a="with \"quotes\", and, commas"} 1
`)
	m, err := parseMetrics(body, "apiserver_request_total", "process_cpu_seconds_total")
	require.NoError(t, err)
	assert.Len(t, m, 4)
	assert.InDelta(t, 15.0, m.sum("process_cpu_seconds_total"), 1e-9)

	later := []byte(strings.ReplaceAll(string(body), `verb="GET",version="v1"} 12`, `verb="GET",version="v1"} 20`))
	after, err := parseMetrics(later)
	require.NoError(t, err)
	assert.Equal(t, "with \"quotes\", and, commas", after[`other_metric{a="with \"quotes\", and, commas"}`].Labels["a"])
	delta := requestDelta(m, after)
	assert.Equal(t, map[string]float64{"GET nodes": 8}, delta)
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		watch        bool
		want         string
	}{
		{"GET", "/api/v1/nodes/n1", false, "GET nodes"},
		{"GET", "/api/v1/nodes", true, "WATCH nodes"},
		{"GET", "/api/v1/nodes", false, "LIST nodes"},
		{"PATCH", "/api/v1/nodes/n1", false, "PATCH nodes"},
		{"PATCH", "/api/v1/nodes/n1/status", false, "PATCH nodes/status"},
		{"POST", "/apis/events.k8s.io/v1/namespaces/default/events", false, "POST events"},
		{"GET", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices", false, "LIST endpointslices"},
		{"POST", "/api/v1/namespaces/kube-system/serviceaccounts/nodeready/token", false, "POST serviceaccounts/token"},
		{"GET", "/api/v1/namespaces/default", false, "GET namespaces"},
		{"GET", "/readyz", false, "GET /readyz"},
	} {
		assert.Equal(t, tc.want, classify(tc.method, tc.path, tc.watch), "%s %s", tc.method, tc.path)
	}
}

// TestRequestCounter: an agent's LISTs of nodes (the fleet's evidence) are counted with
// the bytes they returned, whatever their status, and no other request's bytes are.
func TestRequestCounter(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("labelSelector") == "refused" {
			w.WriteHeader(http.StatusTooManyRequests)
		}
		_, _ = w.Write([]byte(strings.Repeat("x", 1000)))
	}))
	defer srv.Close()
	c := newRequestCounter()
	client := &http.Client{Transport: c.wrap(http.DefaultTransport)}
	for _, path := range []string{"/api/v1/nodes?labelSelector=a", "/api/v1/nodes?labelSelector=refused", "/api/v1/nodes/n1", "/readyz"} {
		resp, err := client.Get(srv.URL + path)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		require.NoError(t, resp.Body.Close())
	}
	counts := c.snapshot()
	assert.Equal(t, map[string]int{"LIST nodes": 1, "LIST nodes (429)": 1, "GET nodes": 1, "GET /readyz": 1}, counts)
	assert.Equal(t, 2, countsFor(counts, evidenceRead))
	assert.Equal(t, 0, countsFor(counts, "GET /readyz (429)"))
	assert.Equal(t, int64(2000), c.listBytes())
	assert.Equal(t, "GET /readyz 1 (the apiserver check), GET nodes 1 (a read of its own node), "+
		"LIST nodes 1 (the fleet's evidence, read only when a failure action is due), LIST nodes (429) 1 (the fleet's evidence, read only when a failure action is due)",
		purposes(counts))
}

func TestParseVerified(t *testing.T) {
	log := []byte(`{"level":"info","node":"n1","message":"Started verification"}
not json
{"level":"info","node":"n1","reason":"Verified","duration_seconds":0.0152,"startup_seconds":0.0018,"checks_seconds":0.006,"release_seconds":0.0074,"message":"Verified node"}
`)
	v, err := parseVerified(log)
	require.NoError(t, err)
	assert.Equal(t, 15200*time.Microsecond, v.Total.Round(time.Microsecond))
	assert.Equal(t, 1800*time.Microsecond, v.Startup.Round(time.Microsecond))
	assert.Equal(t, 6*time.Millisecond, v.Checks.Round(time.Microsecond))
	assert.Equal(t, 7400*time.Microsecond, v.Release.Round(time.Microsecond))

	_, err = parseVerified([]byte(`{"message":"Started verification"}`))
	assert.ErrorIs(t, err, errNoVerifiedLine)
}

func TestFlags(t *testing.T) {
	o, err := parseFlags([]string{"-quick", "-nodes", "300", "-only", "scale,footprint", "-settle", "0s"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, sizeList{300}, o.nodes, "an explicit size wins over -quick")
	assert.Equal(t, 15, o.runs)
	assert.Equal(t, []string{"scale", "overhead"}, o.only)
	assert.Equal(t, []time.Duration{0}, o.settles)

	o, err = parseFlags(nil, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, sizeList{1000, 5000}, o.nodes, "the scale runs at 1000 and at 5000 nodes by default")
	assert.Equal(t, []time.Duration{2 * time.Second}, o.settles, "one scale run per size, with SETTLE_TIME as shipped")
	assert.False(t, o.nodesSet, "the shared-fault run takes its own 1000 nodes unless -nodes says otherwise")
	o, err = parseFlags([]string{"-quick"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, sizeList{100}, o.nodes)
	assert.True(t, o.nodesSet, "-quick sizes the shared-fault run too")
	o, err = parseFlags([]string{"-nodes", "10, 20"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, sizeList{10, 20}, o.nodes)
	for _, bad := range []string{"0", "1000,x", ""} {
		_, err = parseFlags([]string{"-nodes", bad}, &bytes.Buffer{})
		assert.Error(t, err, "-nodes %q", bad)
	}

	_, err = parseFlags([]string{"-only", "speed"}, &bytes.Buffer{})
	assert.ErrorContains(t, err, `unknown benchmark "speed"`)
	assert.Equal(t, " -quick", argsSuffix([]string{"-out", "x.md", "-quick", "-out=y.md"}))
}

func TestCompareScaleGrowth(t *testing.T) {
	small := &scaleResult{nodes: 1000, settle: 5 * time.Second, allVerified: 10 * time.Second, complete: true,
		apiCPUPerNode: 0.020, serverPerNode: 12, meanRequests: 8, rejected: 1000, benchCPU: 7, peakRunning: 900}
	large := &scaleResult{nodes: 5000, settle: 5 * time.Second, allVerified: 60 * time.Second, complete: true,
		apiCPUPerNode: 0.030, serverPerNode: 12, meanRequests: 8, rejected: 10000, benchCPU: 35, peakRunning: 4500}
	other := &scaleResult{nodes: 1000, settle: 0, allVerified: 9 * time.Second, complete: true}
	// The same size and SETTLE_TIME, its agents started 20 a second: not a size to grow from.
	paced := &scaleResult{nodes: 10000, settle: 5 * time.Second, pace: 20, allVerified: 500 * time.Second, complete: true}
	s := compareScale([]*scaleResult{small, other, large, paced})

	var growth []row
	for _, r := range s.Rows {
		if strings.HasPrefix(r.Metric, "growth") {
			growth = append(growth, r)
		}
	}
	require.Len(t, growth, 1, "only SETTLE_TIME=5s ran at two sizes, all at once")
	assert.Equal(t, "growth 1000 → 5000 nodes (×5), SETTLE_TIME=5s", growth[0].Metric)
	assert.Contains(t, growth[0].Value, "all verified s 10 → 60 (×6.00)")
	assert.Contains(t, growth[0].Value, "API server CPU ms 20 → 30 (×1.50)")
	assert.Contains(t, growth[0].Value, "429s 1 → 2 (×2.00)")
	assert.Contains(t, growth[0].Value, "agents at once 900 → 4500 (×5.00)")
}
