package checks_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodeready/nodeready/checks"
	"github.com/nodeready/nodeready/internal/kube"
	"github.com/nodeready/nodeready/internal/kube/adapt"
)

func TestAPIServerReadyz(t *testing.T) {
	tests := []struct {
		name    string
		code    int
		body    string
		wantErr string
	}{
		{name: "ready", code: http.StatusOK, body: "ok"},
		{name: "not ready", code: http.StatusInternalServerError, body: "[-]etcd failed: reason withheld\nreadyz check failed", wantErr: `get /readyz: an error on the server ("[-]etcd failed: reason withheld\nreadyz check failed")`},
		{name: "forbidden", code: http.StatusForbidden, body: `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"forbidden: User \"system:anonymous\" cannot get path \"/readyz\"","reason":"Forbidden","code":403}`, wantErr: `get /readyz: forbidden, check the agent's RBAC and admission policies: forbidden: User "system:anonymous" cannot get path "/readyz"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				mu    sync.Mutex
				paths []string
			)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				paths = append(paths, r.URL.Path)
				mu.Unlock()
				if r.URL.Path != "/readyz" {
					http.NotFound(w, r)
					return
				}
				if tt.code == http.StatusForbidden {
					w.Header().Set("Content-Type", "application/json")
				}
				w.WriteHeader(tt.code)
				_, _ = w.Write([]byte(tt.body))
			}))
			t.Cleanup(srv.Close)
			client, err := kube.NewForConfig(&rest.Config{Host: srv.URL})
			require.NoError(t, err)
			c := checks.NewAPIServer(client, "", "node-1")
			requireIdentity(t, c, "apiserver", "/readyz")

			res := checks.Execute(t.Context(), c, runTimeout)

			mu.Lock()
			assert.Equal(t, []string{"/readyz"}, paths, "one request, no retries")
			mu.Unlock()
			assertErrContains(t, res.Err, tt.wantErr)
		})
	}
}

func TestAPIServerReadyzWithoutRESTClient(t *testing.T) {
	c := checks.NewAPIServer(adapt.Clientset(fake.NewClientset()), checks.APIServerReadyz, "")

	res := checks.Execute(t.Context(), c, time.Second)

	require.Error(t, res.Err)
	assert.Equal(t, "get /readyz: client has no REST client", res.Err.Error())
}

func TestAPIServerNode(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	tests := []struct {
		name     string
		nodeName string
		reactor  k8stesting.ReactionFunc
		wantErr  string
	}{
		{name: "own node", nodeName: "node-1"},
		{name: "missing node", nodeName: "node-2", wantErr: `get node "node-2": nodes "node-2" not found`},
		{name: "forbidden", nodeName: "node-1", reactor: forbidden(schema.GroupResource{Resource: "nodes"}), wantErr: `get node "node-1": forbidden, check the agent's RBAC`},
		{name: "no node name", nodeName: "", wantErr: "get node: no node name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(node)
			if tt.reactor != nil {
				client.PrependReactor("get", "nodes", tt.reactor)
			}
			c := checks.NewAPIServer(adapt.Clientset(client), checks.APIServerNode, tt.nodeName)
			require.Equal(t, "node/"+tt.nodeName, c.Target())

			assertErrContains(t, checks.Execute(t.Context(), c, runTimeout).Err, tt.wantErr)
			for _, a := range client.Actions() {
				assert.Equal(t, "get", a.GetVerb(), "read only")
			}
		})
	}
}

func TestAPIServerUnknownMode(t *testing.T) {
	c := checks.NewAPIServer(adapt.Clientset(fake.NewClientset()), "ping", "node-1")

	res := checks.Execute(t.Context(), c, time.Second)

	require.Error(t, res.Err)
	assert.Equal(t, `unknown apiserver mode "ping", want one of readyz, node`, res.Err.Error())
	assert.Equal(t, []string{"readyz", "node"}, checks.APIServerModes)
}
