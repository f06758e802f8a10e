// Package prometheus runs a real Prometheus for a test: built from the Go module proxy
// (e2e/build/tools/prometheus, by scripts/build-tools.sh), it scrapes the targets the test
// hands it through HTTP service discovery, at the interval of the PodMonitor, keeps what it
// scraped in its own TSDB, and answers PromQL queries over its HTTP API. It stands where a
// cluster's Prometheus stands: what it misses (an agent gone before its first scrape) is
// what a cluster's would miss.
package prometheus

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/freeport"
	"github.com/nodeready/nodeready/e2e/framework/process"
)

// Target is one scrape target: host:port and its target labels.
type Target struct {
	Addr   string
	Labels map[string]string
}

// Options configure a Prometheus.
type Options struct {
	// Job is the job label of every target.
	Job string
	// Interval is the scrape interval.
	Interval time.Duration
	// Targets lists the targets to scrape now; Prometheus asks every SDRefresh.
	Targets func() []Target
	// SDRefresh is how often Prometheus asks for the targets. Its discovery manager passes
	// what it learns on to the scrapers at most every 5 seconds besides.
	SDRefresh time.Duration
}

// Prometheus is a running Prometheus.
type Prometheus struct {
	url  string
	proc *process.Process
}

// Start builds Prometheus if needed, starts it, and stops it when the test ends; it returns
// once Prometheus is ready.
func Start(t *testing.T, o Options) *Prometheus {
	t.Helper()
	bin := framework.BuildTool(t, "prometheus")
	sd := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		type group struct {
			Targets []string          `json:"targets"`
			Labels  map[string]string `json:"labels"`
		}
		groups := []group{}
		for _, tg := range o.Targets() {
			groups = append(groups, group{Targets: []string{tg.Addr}, Labels: tg.Labels})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(groups)
	}))
	t.Cleanup(sd.Close)

	dir := t.TempDir()
	config := fmt.Sprintf(`global:
  scrape_interval: %s
  scrape_timeout: 10s
scrape_configs:
  - job_name: %q
    http_sd_configs:
      - url: %s
        refresh_interval: %s
`, model(o.Interval), o.Job, sd.URL, model(o.SDRefresh))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o644))
	port, err := freeport.Port()
	require.NoError(t, err)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(bin,
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn",
	)
	logPath := filepath.Join(dir, "prometheus.log")
	proc, err := process.Start(cmd, process.Options{Name: "prometheus", LogPath: logPath})
	require.NoError(t, err)
	p := &Prometheus{url: "http://" + addr, proc: proc}
	t.Cleanup(func() {
		p.proc.Stop(10*time.Second, nil)
		if t.Failed() {
			t.Logf("prometheus log:\n%s", process.Tail(logPath, 40))
		}
	})
	err = wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if proc.Exited() {
			return false, proc.ExitError()
		}
		resp, err := http.Get(p.url + "/-/ready")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	require.NoError(t, err, "prometheus ready:\n%s", process.Tail(logPath, 40))
	return p
}

// model is d as Prometheus' configuration writes a duration.
func model(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) + "ms" }

// Sample is one series' value in a query's answer.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Series is one series of a range query's answer.
type Series struct {
	Labels map[string]string
	Points []Point
}

// Point is one value of a Series.
type Point struct {
	At    time.Time
	Value float64
}

// Query evaluates expr at the time at (an instant vector).
func (p *Prometheus) Query(ctx context.Context, expr string, at time.Time) ([]Sample, error) {
	var data []struct {
		Metric map[string]string `json:"metric"`
		Value  [2]any            `json:"value"`
	}
	if err := p.get(ctx, "/api/v1/query", url.Values{"query": {expr}, "time": {unix(at)}}, "vector", &data); err != nil {
		return nil, err
	}
	out := make([]Sample, 0, len(data))
	for _, d := range data {
		v, err := value(d.Value)
		if err != nil {
			return nil, err
		}
		out = append(out, Sample{Labels: d.Metric, Value: v.Value})
	}
	return out, nil
}

// QueryRange evaluates expr at every step from start to end.
func (p *Prometheus) QueryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]Series, error) {
	var data []struct {
		Metric map[string]string `json:"metric"`
		Values [][2]any          `json:"values"`
	}
	q := url.Values{"query": {expr}, "start": {unix(start)}, "end": {unix(end)}, "step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}}
	if err := p.get(ctx, "/api/v1/query_range", q, "matrix", &data); err != nil {
		return nil, err
	}
	out := make([]Series, 0, len(data))
	for _, d := range data {
		s := Series{Labels: d.Metric}
		for _, raw := range d.Values {
			pt, err := value(raw)
			if err != nil {
				return nil, err
			}
			s.Points = append(s.Points, pt)
		}
		out = append(out, s)
	}
	return out, nil
}

func (p *Prometheus) get(ctx context.Context, path string, q url.Values, resultType string, data any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+path+"?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return fmt.Errorf("%s %s: %w", path, q.Get("query"), err)
	}
	if body.Status != "success" {
		return fmt.Errorf("%s %s: %s", path, q.Get("query"), body.Error)
	}
	if body.Data.ResultType != resultType {
		return fmt.Errorf("%s %s: a %s, not a %s", path, q.Get("query"), body.Data.ResultType, resultType)
	}
	return json.Unmarshal(body.Data.Result, data)
}

// value reads a [time, "value"] pair of the HTTP API.
func value(raw [2]any) (Point, error) {
	ts, ok := raw[0].(float64)
	s, ok2 := raw[1].(string)
	if !ok || !ok2 {
		return Point{}, fmt.Errorf("a sample that is no [time, value]: %v", raw)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return Point{}, err
	}
	return Point{At: time.UnixMilli(int64(ts * 1000)), Value: v}, nil
}

func unix(t time.Time) string { return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64) }
