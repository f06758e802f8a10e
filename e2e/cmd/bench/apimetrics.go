package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
)

// sample is one series of a Prometheus text exposition: name, labels, value.
type sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// metricSet is a scrape: every sample, by series key.
type metricSet map[string]sample

// scrapeAPIServer reads the API server's /metrics with the admin client.
func scrapeAPIServer(ctx context.Context, client kubernetes.Interface) (metricSet, error) {
	body, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("GET /metrics: %w", err)
	}
	return parseMetrics(body, "apiserver_request_total", "process_cpu_seconds_total", "process_resident_memory_bytes",
		"apiserver_flowcontrol_rejected_requests_total", "apiserver_flowcontrol_nominal_limit_seats",
		"apiserver_flowcontrol_request_wait_duration_seconds_sum", "apiserver_flowcontrol_request_wait_duration_seconds_count",
		"apiserver_flowcontrol_request_execution_seconds_sum", "apiserver_flowcontrol_request_execution_seconds_count",
		"apiserver_request_duration_seconds_sum", "apiserver_request_duration_seconds_count")
}

// parseMetrics parses the samples of the named metrics (all when none is named) from the
// Prometheus text format. Comments, and series it cannot read, are skipped.
func parseMetrics(body []byte, names ...string) (metricSet, error) {
	set := metricSet{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s, ok := parseSample(line)
		if !ok || (len(names) > 0 && !slices.Contains(names, s.Name)) {
			continue
		}
		set[seriesKey(s.Name, s.Labels)] = s
	}
	return set, sc.Err()
}

// parseSample parses `name{a="x",b="y"} value [timestamp]`.
func parseSample(line string) (sample, bool) {
	s := sample{Labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i <= 0 {
		return s, false
	}
	s.Name, line = line[:i], line[i:]
	if line[0] == '{' {
		line = line[1:]
		for {
			line = strings.TrimLeft(line, " ,")
			if strings.HasPrefix(line, "}") {
				line = line[1:]
				break
			}
			eq := strings.Index(line, `="`)
			if eq <= 0 {
				return s, false
			}
			key := line[:eq]
			value, rest, ok := unquote(line[eq+2:])
			if !ok {
				return s, false
			}
			s.Labels[key], line = value, rest
		}
	}
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return s, false
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return s, false
	}
	s.Value = v
	return s, true
}

// unquote reads a label value up to its closing quote, undoing the format's escapes.
func unquote(s string) (value, rest string, ok bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return b.String(), s[i+1:], true
		case '\\':
			if i+1 == len(s) {
				return "", "", false
			}
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			default:
				b.WriteByte(s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", "", false
}

func seriesKey(name string, labels map[string]string) string {
	var b strings.Builder
	b.WriteString(name)
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		fmt.Fprintf(&b, ",%s=%s", k, labels[k])
	}
	return b.String()
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
