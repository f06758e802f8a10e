package kube_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/nodeready/nodeready/internal/kube"
)

// request is what the API server was asked.
type request struct{ method, path, accept, body string }

// apiServer answers every request with an empty JSON object of the kind the
// path asks for, and records the requests.
func apiServer(t *testing.T) (kube.Interface, func() []request) {
	var mu sync.Mutex
	var got []request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, request{r.Method, r.URL.Path, r.Header.Get("Accept"), string(body)})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/apis":
			_ = json.NewEncoder(w).Encode(metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
				Groups: []metav1.APIGroup{{Name: "resource.k8s.io", Versions: []metav1.GroupVersionForDiscovery{{GroupVersion: "resource.k8s.io/v1", Version: "v1"}}}}})
		case "/api/v1/nodes/node-a":
			_ = json.NewEncoder(w).Encode(corev1.Node{TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
				ObjectMeta: metav1.ObjectMeta{Name: "node-a", ResourceVersion: "7"}})
		default:
			_, _ = w.Write([]byte(`{}`))
		}
	}))
	t.Cleanup(srv.Close)
	client, err := kube.NewForConfig(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	return client, func() []request {
		mu.Lock()
		defer mu.Unlock()
		return append([]request(nil), got...)
	}
}

// TestRequests: each typed client asks for its resource where the API server
// serves it, preferring protobuf as client-go's generated clients do, and
// decodes the answer.
func TestRequests(t *testing.T) {
	client, got := apiServer(t)
	ctx := t.Context()

	node, err := client.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "7", node.ResourceVersion)
	_, err = client.CoreV1().Nodes().Patch(ctx, "node-a", types.StrategicMergePatchType, []byte(`{}`), metav1.PatchOptions{FieldManager: "m"}, "status")
	require.NoError(t, err)
	_, err = client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	_, err = client.AppsV1().DaemonSets("kube-system").Get(ctx, "ds", metav1.GetOptions{})
	require.NoError(t, err)
	_, err = client.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	_, err = client.NetworkingV1().IPAddresses().Get(ctx, "10.96.0.10", metav1.GetOptions{})
	require.NoError(t, err)
	_, err = client.StorageV1().CSINodes().Get(ctx, "node-a", metav1.GetOptions{})
	require.NoError(t, err)
	_, err = client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	_, err = client.ResourceV1beta1().ResourceSlices().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	_, err = client.EventsV1().Events("default").Create(ctx, &eventsv1.Event{}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, client.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Delete(ctx, "b", metav1.DeleteOptions{}))
	groups, err := client.Discovery().ServerGroups(ctx)
	require.NoError(t, err)
	assert.Equal(t, "resource.k8s.io", groups.Groups[0].Name)

	const protobuf = "application/vnd.kubernetes.protobuf,application/json"
	reqs := got()
	paths := make([]string, len(reqs))
	for i, r := range reqs {
		paths[i] = r.method + " " + r.path
		if r.path != "/apis" && r.method != http.MethodDelete {
			assert.Equal(t, protobuf, r.accept, paths[i])
		}
	}
	assert.Equal(t, []string{
		"GET /api/v1/nodes/node-a",
		"PATCH /api/v1/nodes/node-a/status",
		"GET /api/v1/namespaces/kube-system/pods",
		"GET /apis/apps/v1/namespaces/kube-system/daemonsets/ds",
		"GET /apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
		"GET /apis/networking.k8s.io/v1/ipaddresses/10.96.0.10",
		"GET /apis/storage.k8s.io/v1/csinodes/node-a",
		"GET /apis/resource.k8s.io/v1/resourceslices",
		"GET /apis/resource.k8s.io/v1beta1/resourceslices",
		"POST /apis/events.k8s.io/v1/namespaces/default/events",
		"DELETE /apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings/b",
		"GET /apis",
	}, paths)
	assert.JSONEq(t, `{"kind":"DeleteOptions","apiVersion":"admissionregistration.k8s.io/v1"}`, reqs[10].body, "the delete's options, as client-go sends them")
}
