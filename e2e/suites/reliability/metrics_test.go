package reliability

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/nodeready/nodeready/e2e/framework/promtext"
)

// samples are the samples of a scrape by series key (promtext.Sample.Key):
// `nodeready_node_patches_total{result="error"}`.
type samples map[string]float64

// scrapeAgent reads an agent's /metrics (kubelet.PodInfo.MetricsAddr).
func scrapeAgent(ctx context.Context, addr string) (samples, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	list, err := promtext.Scrape(ctx, "http://"+addr+"/metrics", "nodeready_rounds_total", "nodeready_verification_failures_total",
		"nodeready_node_patches_total", "nodeready_verified")
	if err != nil {
		return nil, err
	}
	out := samples{}
	for _, s := range list {
		out[s.Key()] = s.Value
	}
	return out, nil
}

// requestKey is a row of the request tables: the verb and what it was about (the resource
// and subresource, or the path of a non-resource request such as /readyz).
type requestKey struct {
	Verb, Resource string
}

func (k requestKey) String() string { return k.Verb + " " + k.Resource }

// requestCounts counts requests by verb and resource.
type requestCounts map[requestKey]float64

func (c requestCounts) total() float64 {
	var n float64
	for _, v := range c {
		n += v
	}
	return n
}

// sub returns c minus before, leaving out rows that did not grow.
func (c requestCounts) sub(before requestCounts) requestCounts {
	out := requestCounts{}
	for k, v := range c {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// apiServerRequests reads apiserver_request_total from the API server's /metrics, summed
// over codes, scopes and versions: every request every client made since the API server
// started.
func apiServerRequests(ctx context.Context, client kubernetes.Interface) (requestCounts, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	raw, err := client.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("GET /metrics of the API server: %w", err)
	}
	list, err := promtext.Parse(bytes.NewReader(raw), "apiserver_request_total")
	if err != nil {
		return nil, err
	}
	out := requestCounts{}
	for _, s := range list {
		l := s.Labels
		res := l["resource"]
		switch {
		case res == "": // a non-resource request: the path is in subresource
			res = l["subresource"]
		case l["subresource"] != "":
			res += "/" + l["subresource"]
		}
		out[requestKey{Verb: l["verb"], Resource: res}] += s.Value
	}
	return out, nil
}

// auditLog reads the API server's audit log, which records the agents' requests (see
// auditPolicy). It is appended to, also across API server restarts.
type auditLog struct {
	path string
}

// auditEvent is the part of an audit.k8s.io/v1 Event the tests read.
type auditEvent struct {
	Stage      string `json:"stage"`
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string              `json:"username"`
		Extra    map[string][]string `json:"extra"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceived time.Time `json:"requestReceivedTimestamp"`
	StageTimestamp  time.Time `json:"stageTimestamp"`
}

// node is the node the request came from: the node name in the pod-bound token.
func (e auditEvent) node() string {
	if n := e.User.Extra["authentication.kubernetes.io/node-name"]; len(n) > 0 {
		return n[0]
	}
	return ""
}

func (e auditEvent) key() requestKey {
	if e.ObjectRef == nil || e.ObjectRef.Resource == "" {
		path, _, _ := strings.Cut(e.RequestURI, "?")
		return requestKey{Verb: strings.ToUpper(e.Verb), Resource: path}
	}
	res := e.ObjectRef.Resource
	if e.ObjectRef.Subresource != "" {
		res += "/" + e.ObjectRef.Subresource
	}
	return requestKey{Verb: strings.ToUpper(e.Verb), Resource: res}
}

func (e auditEvent) code() int {
	if e.ResponseStatus == nil {
		return 0
	}
	return e.ResponseStatus.Code
}

// offset returns the current end of the log, from which a later read starts.
func (a *auditLog) offset(t *testing.T) int64 {
	t.Helper()
	fi, err := os.Stat(a.path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	return fi.Size()
}

// since returns the completed requests of the agents on the given nodes (every node when
// none is given) logged after offset.
func (a *auditLog) since(t *testing.T, offset int64, nodes ...string) []auditEvent {
	t.Helper()
	f, err := os.Open(a.path)
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		t.Fatalf("audit log: %v", err)
	}
	var out []auditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue // a line the API server was writing when it stopped
		}
		if e.Stage != "ResponseComplete" || e.User.Username != agentUser {
			continue
		}
		if len(nodes) > 0 && !slices.Contains(nodes, e.node()) {
			continue
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("audit log: %v", err)
	}
	return out
}

// countRequests counts events by verb and resource.
func countRequests(events []auditEvent) requestCounts {
	out := requestCounts{}
	for _, e := range events {
		out[e.key()]++
	}
	return out
}

// requestTable formats request counts as a table, rows sorted by verb and resource; perNode
// adds a column with each count divided by nodes.
func requestTable(title string, counts requestCounts, nodes int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", title)
	fmt.Fprintf(&b, "  %-8s %-40s %9s %9s\n", "VERB", "RESOURCE", "TOTAL", "PER NODE")
	keys := slices.SortedFunc(maps.Keys(counts), func(a, b requestKey) int {
		return strings.Compare(a.String(), b.String())
	})
	for _, k := range keys {
		fmt.Fprintf(&b, "  %-8s %-40s %9.0f %9.2f\n", k.Verb, k.Resource, counts[k], counts[k]/float64(nodes))
	}
	fmt.Fprintf(&b, "  %-8s %-40s %9.0f %9.2f\n", "", "all", counts.total(), counts.total()/float64(nodes))
	return b.String()
}
