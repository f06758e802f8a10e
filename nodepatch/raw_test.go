package nodepatch

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"github.com/nodeready/nodeready/internal/kube"
)

// newerServer is an API server of a newer Kubernetes as far as one Node goes: it stores the
// node as JSON and applies JSON Patches to that JSON, as kube-apiserver does, so a taint may
// carry a field that this client's API types do not know.
type newerServer struct {
	mu      sync.Mutex
	node    []byte
	patches int
}

func (s *newerServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch r.Method {
	case http.MethodGet:
		_, _ = w.Write(s.node)
	case http.MethodPatch:
		s.patches++
		body, _ := io.ReadAll(r.Body)
		patch, err := jsonpatch.DecodePatch(body)
		if err == nil {
			var out []byte
			if out, err = patch.Apply(s.node); err == nil {
				s.node = out
				_, _ = w.Write(out)
				return
			}
		}
		// kube-apiserver answers a failed JSON Patch test 422 Invalid.
		w.WriteHeader(http.StatusUnprocessableEntity)
		_ = json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure",
			"reason": "Invalid", "code": 422, "message": err.Error()})
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

// TestReleaseKeepsTaintFieldsItDoesNotKnow: a foreign taint carries a field that a newer
// Kubernetes stores. The test of the taint list as these types decode it fails; the release
// then tests and keeps the list as the server sent it, so the node is released in one more
// write and the foreign taint keeps its field.
func TestReleaseKeepsTaintFieldsItDoesNotKnow(t *testing.T) {
	srv := &newerServer{node: []byte(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"node-a","resourceVersion":"7",` +
		`"labels":{"pool":"a"}},"spec":{"taints":[` +
		`{"key":"node-ready/unverified","value":"true","effect":"NoSchedule"},` +
		`{"key":"example.com/dedicated","value":"infra","effect":"NoSchedule","newerField":{"since":"v1.40"}}]}}`)}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	client, err := kube.NewForConfig(&rest.Config{Host: ts.URL})
	require.NoError(t, err)
	p := New(client, "node-a", Spec{Taints: []corev1.Taint{startup}, LabelKey: "node-ready/verified", LabelValue: "true"})

	outcome, err := p.Release(t.Context(), map[string]string{"node-ready/verified-at": "now"})
	require.NoError(t, err)
	assert.Equal(t, Patched, outcome)
	assert.Equal(t, 2, srv.patches, "the typed test fails once, the raw one lands")

	var got struct {
		Metadata struct{ Labels, Annotations map[string]string }
		Spec     struct{ Taints []map[string]any }
	}
	require.NoError(t, json.Unmarshal(srv.node, &got))
	assert.Equal(t, map[string]string{"pool": "a", "node-ready/verified": "true"}, got.Metadata.Labels)
	assert.Equal(t, "now", got.Metadata.Annotations["node-ready/verified-at"])
	require.Len(t, got.Spec.Taints, 1, "the startup taint is gone")
	assert.Equal(t, map[string]any{"key": "example.com/dedicated", "value": "infra", "effect": "NoSchedule",
		"newerField": map[string]any{"since": "v1.40"}}, got.Spec.Taints[0], "the foreign taint keeps the field this client does not know")
}
