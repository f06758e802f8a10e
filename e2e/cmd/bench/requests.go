package main

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// requestCounter counts the API requests of in-process agents on the client side, where it
// is known whose request each is: the API server's own counters also hold the controllers',
// the scheduler's and the benchmark's.
type requestCounter struct {
	mu     sync.Mutex
	counts map[string]int
	// listNodeBytes is the size of the bodies of the agent's LISTs of nodes (the fleet's
	// evidence), as read by its client, after any gzip.
	listNodeBytes int64
}

func newRequestCounter() *requestCounter { return &requestCounter{counts: map[string]int{}} }

// evidenceRead is the fleet's evidence read (agent/fleet.go): the agent's only LIST of nodes.
const evidenceRead = "LIST nodes"

// wrap is a rest.Config WrapTransport.
func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		key := classify(req.Method, req.URL.Path, req.URL.Query().Get("watch") == "true")
		switch {
		case err != nil:
			key += " (error)"
		case resp.StatusCode >= 300:
			key += fmt.Sprintf(" (%d)", resp.StatusCode)
		}
		c.mu.Lock()
		c.counts[key]++
		c.mu.Unlock()
		if err == nil && strings.HasPrefix(key, evidenceRead) {
			resp.Body = &countingBody{ReadCloser: resp.Body, c: c}
		}
		return resp, err
	})
}

func (c *requestCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts)
}

// listBytes returns the bytes the agent's LISTs of nodes returned so far.
func (c *requestCounter) listBytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.listNodeBytes
}

// countingBody counts the bytes of a response body its reader reads.
type countingBody struct {
	io.ReadCloser
	c *requestCounter
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.c.mu.Lock()
	b.c.listNodeBytes += int64(n)
	b.c.mu.Unlock()
	return n, err
}

// countsFor returns how many of the requests in counts are of kind (any status).
func countsFor(counts map[string]int, kind string) int {
	n := 0
	for k, v := range counts {
		if k == kind || strings.HasPrefix(k, kind+" (") {
			n += v
		}
	}
	return n
}

// requestPurpose says what an agent's request is for, as a person reads the success path.
var requestPurpose = map[string]string{
	"GET /readyz":         "the apiserver check",
	"LIST endpointslices": "the endpoints check",
	"PATCH nodes/status":  "its own node's condition",
	"PATCH nodes":         "its own node's labels and taint: the release, or a failing node's mark",
	"GET nodes":           "a read of its own node",
	"POST events":         "an Event: Verified on the success path",
	"WATCH nodes":         "the watch of its own node: the release, the settle window",
	evidenceRead:          "the fleet's evidence, read only when a failure action is due",
	"GET /version":        "the clock check, when the answers at hand took too long to tell",
	"GET ipaddresses":     "a failing dns check: is the nameserver a Service's address",
	"DELETE nodes":        "replace-node",
}

// purposes renders counts on one line with what each request is for, such as
// "GET /readyz 1 (the apiserver check), PATCH nodes 1 (...)".
func purposes(counts map[string]int) string {
	keys := slices.Sorted(maps.Keys(counts))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		base, _, _ := strings.Cut(k, " (")
		if p, ok := requestPurpose[base]; ok {
			parts = append(parts, fmt.Sprintf("%s %d (%s)", k, counts[k], p))
		} else {
			parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
		}
	}
	return strings.Join(parts, ", ")
}

// meanPurposes renders counts per node on one line, each request with its attempts that
// failed (any status but 2xx, or no answer) folded in, largest first, with what it is for,
// such as "LIST endpointslices 2.25 (the endpoints check; 0.09 failed)".
func meanPurposes(counts map[string]float64, nodes int) string {
	all, failed := map[string]float64{}, map[string]float64{}
	for k, v := range counts {
		base, _, withStatus := strings.Cut(k, " (")
		all[base] += v
		if withStatus {
			failed[base] += v
		}
	}
	keys := slices.Collect(maps.Keys(all))
	slices.SortFunc(keys, func(a, b string) int {
		if all[a] != all[b] {
			if all[a] > all[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	n := float64(max(nodes, 1))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		what := requestPurpose[k]
		if failed[k] > 0 {
			what = strings.TrimPrefix(fmt.Sprintf("%s; %.2f failed", what, failed[k]/n), "; ")
		}
		if what == "" {
			parts = append(parts, fmt.Sprintf("%s %.2f", k, all[k]/n))
		} else {
			parts = append(parts, fmt.Sprintf("%s %.2f (%s)", k, all[k]/n, what))
		}
	}
	return strings.Join(parts, ", ")
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// classify names a request as the API server's metrics do: the verb (GET of one object,
// LIST, WATCH, POST, PATCH, PUT, DELETE) and the resource with its subresource, or the
// path for a request outside the API, such as GET /readyz.
func classify(method, path string, watch bool) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	var rest []string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		rest = parts[2:] // api/v1/...
	case len(parts) >= 3 && parts[0] == "apis":
		rest = parts[3:] // apis/group/version/...
	default:
		return method + " " + path
	}
	if len(rest) >= 2 && rest[0] == "namespaces" && len(rest) != 2 {
		rest = rest[2:] // namespaces/NS/resource/...; "namespaces/NS" alone is a namespace
	}
	if len(rest) == 0 {
		return method + " " + path
	}
	resource, named, sub := rest[0], len(rest) >= 2, ""
	if len(rest) >= 3 {
		sub = "/" + strings.Join(rest[2:], "/")
	}
	verb := method
	switch {
	case method == http.MethodGet && watch:
		verb = "WATCH"
	case method == http.MethodGet && !named:
		verb = "LIST"
	}
	return verb + " " + resource + sub
}

// renderCounts writes counts per node as a markdown table, most frequent first, with the
// total.
func renderCounts(w io.Writer, counts map[string]float64, nodes int) {
	keys := slices.Collect(maps.Keys(counts))
	slices.SortFunc(keys, func(a, b string) int {
		if counts[a] != counts[b] {
			if counts[a] > counts[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	var total float64
	fmt.Fprintln(w, "| request | total | per node |")
	fmt.Fprintln(w, "| --- | --- | --- |")
	for _, k := range keys {
		total += counts[k]
		fmt.Fprintf(w, "| %s | %.0f | %.2f |\n", k, counts[k], counts[k]/float64(nodes))
	}
	fmt.Fprintf(w, "| **all** | %.0f | %.2f |\n", total, total/float64(nodes))
}

func toFloat(m map[string]int) map[string]float64 {
	f := make(map[string]float64, len(m))
	for k, v := range m {
		f[k] = float64(v)
	}
	return f
}

func total(m map[string]float64) float64 {
	var t float64
	for _, v := range m {
		t += v
	}
	return t
}

// breakdown renders counts on one line, such as "GET nodes 2, PATCH nodes 1".
func breakdown(counts map[string]int) string {
	keys := slices.Sorted(maps.Keys(counts))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
	}
	return strings.Join(parts, ", ")
}
