// Package promtext reads the Prometheus text format, as the agent and the API server serve it
// on /metrics, into flat samples. Parsing is expfmt's, Prometheus's own.
package promtext

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Sample is one series of an exposition: a line of the text format.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Key is the series as the text format writes it, labels sorted by name as client_golang
// writes them: `nodeready_node_patches_total{result="error"}`, or the bare name.
func (s Sample) Key() string {
	if len(s.Labels) == 0 {
		return s.Name
	}
	var b strings.Builder
	b.WriteString(s.Name)
	b.WriteByte('{')
	for i, k := range slices.Sorted(maps.Keys(s.Labels)) {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `%s="%s"`, k, escaper.Replace(s.Labels[k]))
	}
	b.WriteByte('}')
	return b.String()
}

// escaper escapes a label value as the text format does.
var escaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)

// Parse reads the text format and returns the samples of the named metrics (every sample
// when none is named). A histogram or summary gives its series as the text format writes
// them: name_bucket{le=...} or name{quantile=...}, name_sum and name_count.
func Parse(r io.Reader, names ...string) ([]Sample, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	var out []Sample
	add := func(name string, labels map[string]string, value float64) {
		if len(names) == 0 || slices.Contains(names, name) {
			out = append(out, Sample{Name: name, Labels: labels, Value: value})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(families)) {
		mf := families[name]
		for _, m := range mf.GetMetric() {
			labels := func() map[string]string {
				l := make(map[string]string, len(m.GetLabel())+1)
				for _, lp := range m.GetLabel() {
					l[lp.GetName()] = lp.GetValue()
				}
				return l
			}
			with := func(k, v string) map[string]string {
				l := labels()
				l[k] = v
				return l
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				add(name, labels(), m.GetCounter().GetValue())
			case dto.MetricType_GAUGE:
				add(name, labels(), m.GetGauge().GetValue())
			case dto.MetricType_UNTYPED:
				add(name, labels(), m.GetUntyped().GetValue())
			case dto.MetricType_SUMMARY:
				s := m.GetSummary()
				for _, q := range s.GetQuantile() {
					add(name, with(model.QuantileLabel, formatFloat(q.GetQuantile())), q.GetValue())
				}
				add(name+"_sum", labels(), s.GetSampleSum())
				add(name+"_count", labels(), float64(s.GetSampleCount()))
			case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
				// expfmt keeps integral counts as integers and others as floats.
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					count := float64(b.GetCumulativeCount())
					if b.CumulativeCountFloat != nil {
						count = b.GetCumulativeCountFloat()
					}
					add(name+"_bucket", with(model.BucketLabel, formatFloat(b.GetUpperBound())), count)
				}
				add(name+"_sum", labels(), h.GetSampleSum())
				count := float64(h.GetSampleCount())
				if h.SampleCountFloat != nil {
					count = h.GetSampleCountFloat()
				}
				add(name+"_count", labels(), count)
			}
		}
	}
	return out, nil
}

// formatFloat writes a bucket bound or quantile as the text format does.
func formatFloat(f float64) string {
	switch {
	case math.IsInf(f, +1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	default:
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
}

// Scrape GETs url, a /metrics endpoint, and parses it as Parse does.
func Scrape(ctx context.Context, url string, names ...string) ([]Sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req) // the error names the method and URL
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	samples, err := Parse(resp.Body, names...)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	return samples, nil
}
