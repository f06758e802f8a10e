package main

import (
	"bytes"
	"context"
	"fmt"

	"k8s.io/client-go/kubernetes"

	"github.com/nodeready/nodeready/e2e/framework/promtext"
)

// metricSet is a scrape: every sample, by series key (promtext.Sample.Key).
type metricSet map[string]promtext.Sample

// scrapeAPIServer reads the API server's /metrics with the admin client.
func scrapeAPIServer(ctx context.Context, client kubernetes.Interface) (metricSet, error) {
	body, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("GET /metrics: %w", err)
	}
	return parseMetrics(body, scrapedMetrics...)
}

// scrapedMetrics are the API server's metrics the scale runs read; the policy benchmark adds
// admissionMetrics.
var scrapedMetrics = append([]string{"apiserver_request_total", "process_cpu_seconds_total", "process_resident_memory_bytes",
	"apiserver_flowcontrol_rejected_requests_total", "apiserver_flowcontrol_nominal_limit_seats",
	"apiserver_flowcontrol_request_wait_duration_seconds_sum", "apiserver_flowcontrol_request_wait_duration_seconds_count",
	"apiserver_flowcontrol_request_execution_seconds_sum", "apiserver_flowcontrol_request_execution_seconds_count",
	"apiserver_request_duration_seconds_sum", "apiserver_request_duration_seconds_count",
	"apiserver_response_sizes_sum", "apiserver_response_sizes_count"}, admissionMetrics...)

// parseMetrics parses the samples of the named metrics (all when none is named) from the
// Prometheus text format.
func parseMetrics(body []byte, names ...string) (metricSet, error) {
	samples, err := promtext.Parse(bytes.NewReader(body), names...)
	if err != nil {
		return nil, err
	}
	set := metricSet{}
	for _, s := range samples {
		set[s.Key()] = s
	}
	return set, nil
}

// sum adds the values of every series of the metric.
func (m metricSet) sum(name string) float64 {
	var total float64
	for _, s := range m {
		if s.Name == name {
			total += s.Value
		}
	}
	return total
}

// sumWhere is sum over the series whose label has the value.
func (m metricSet) sumWhere(name, label, value string) float64 {
	var total float64
	for _, s := range m {
		if s.Name == name && s.Labels[label] == value {
			total += s.Value
		}
	}
	return total
}

// requestKey names a kind of API request the way a person reads it: "GET nodes",
// "PATCH nodes/status", "WATCH nodes", "GET /readyz" for a path outside the API.
func requestKey(verb, resource, subresource string) string {
	switch {
	case resource == "":
		return verb + " (non-resource)"
	case subresource != "":
		return verb + " " + resource + "/" + subresource
	default:
		return verb + " " + resource
	}
}

// requestDelta returns, per kind of request, how many the API server served between two
// scrapes of apiserver_request_total.
func requestDelta(before, after metricSet) map[string]float64 {
	return seriesDelta(before, after, "apiserver_request_total")
}

// seriesDelta is requestDelta for any metric with the verb, resource and subresource labels.
func seriesDelta(before, after metricSet, name string) map[string]float64 {
	delta := map[string]float64{}
	for key, s := range after {
		if s.Name != name {
			continue
		}
		d := s.Value - before[key].Value
		if d <= 0 {
			continue
		}
		delta[requestKey(s.Labels["verb"], s.Labels["resource"], s.Labels["subresource"])] += d
	}
	return delta
}
