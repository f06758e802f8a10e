package wiring

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/nodeready/nodeready/internal/config"
	"github.com/nodeready/nodeready/internal/kube"
)

// syncBuffer is the agent's stderr: lines from client-go's goroutines and the test's.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines parses every line written so far, failing on one that is not JSON.
func (b *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for line := range strings.Lines(b.buf.String()) {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), "a line that is not JSON: %q", line)
		out = append(out, m)
	}
	return out
}

// agentLogger is the agent's logger at level writing to a syncBuffer, with
// client-go's logs routed to it for the test.
func agentLogger(t *testing.T, level string) *syncBuffer {
	t.Helper()
	out := &syncBuffer{}
	RouteClientGoLogs(NewLogger(config.Config{LogLevel: level, LogFormat: "json", NodeName: "node-a"}, out))
	t.Cleanup(klog.ClearLogger)
	return out
}

// TestReflectorLogsAreJSON: the node watch's reflector (client-go's, as
// nodepatch runs it) failing to list writes a JSON line through the agent's
// logger, with the node and the error, at Warn: client-go retries it.
func TestReflectorLogsAreJSON(t *testing.T) {
	out := agentLogger(t, "info")
	lw := &cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			return nil, errors.New("connection refused")
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			return nil, errors.New("connection refused")
		},
	}
	r := cache.NewReflector(lw, &corev1.Node{}, cache.NewStore(cache.MetaNamespaceKeyFunc), 0)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); r.RunWithContext(ctx) }()
	defer func() { cancel(); <-done }()

	var line map[string]any
	require.Eventually(t, func() bool {
		for _, l := range out.lines(t) {
			if strings.Contains(l["error"].(string), "connection refused") {
				line = l
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "the reflector's failed list")
	assert.Equal(t, "warn", line["level"])
	assert.Equal(t, "client-go", line["source"])
	assert.Equal(t, "node-a", line["node"])
	assert.NotEmpty(t, line["message"])
}

// TestKlogLinesFollowLogLevel: client-go's klog lines are JSON through the
// agent's logger, its detail (V(1) and above) only at LOG_LEVEL=debug.
func TestKlogLinesFollowLogLevel(t *testing.T) {
	out := agentLogger(t, "info")
	klog.Background().Info("Caches populated", "type", "*v1.Node", "reflector", klog.KObj(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}))
	klog.Background().V(2).Info("Detail below LOG_LEVEL")
	klog.Warning("Plain klog warning")
	klog.Flush()
	lines := out.lines(t)
	require.Len(t, lines, 2, "the V(2) line is below info")
	assert.Equal(t, "info", lines[0]["level"])
	assert.Equal(t, "Caches populated", lines[0]["message"])
	assert.Equal(t, map[string]any{"name": "node-a"}, lines[0]["reflector"], "klog.KObj as klog's JSON writes it")
	assert.Equal(t, "Plain klog warning", lines[1]["message"])

	out = agentLogger(t, "debug")
	klog.Background().V(2).Info("Detail at debug")
	lines = out.lines(t)
	require.Len(t, lines, 1)
	assert.Equal(t, "debug", lines[0]["level"])
}

// TestAPIWarningsAreJSON: a warning the API server sends with a response is a
// Warn line of the agent's logger, as main's clients are built.
func TestAPIWarningsAreJSON(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Warning", `299 - "node-ready.io/v1beta1 Thing is deprecated"`)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(corev1.Node{TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: "node-a"}})
	}))
	t.Cleanup(srv.Close)
	out := &syncBuffer{}
	log := NewLogger(config.Config{LogLevel: "info", LogFormat: "json"}, out)
	client, err := kube.NewForConfig(&rest.Config{Host: srv.URL, WarningHandler: WarningHandler(log)})
	require.NoError(t, err)

	_, err = client.CoreV1().Nodes().Get(t.Context(), "node-a", metav1.GetOptions{})
	require.NoError(t, err)
	lines := out.lines(t)
	require.Len(t, lines, 1)
	assert.Equal(t, "warn", lines[0]["level"])
	assert.Equal(t, "node-ready.io/v1beta1 Thing is deprecated", lines[0]["warning"])
	assert.Equal(t, "client-go", lines[0]["source"])
}

// TestMillisecondTimestamps: every line's time is RFC 3339 to the millisecond.
func TestMillisecondTimestamps(t *testing.T) {
	out := &syncBuffer{}
	log := NewLogger(config.Config{LogLevel: "info", LogFormat: "json"}, out)
	log.Info().Msg("Started verification")
	lines := out.lines(t)
	require.Len(t, lines, 1)
	ts, _ := lines[0]["time"].(string)
	assert.Regexp(t, regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(Z|[+-]\d\d:\d\d)$`), ts)
	parsed, err := time.Parse(time.RFC3339, ts)
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now(), parsed, time.Minute)
}
