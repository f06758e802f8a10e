package checks_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/nodeready/nodeready/checks"
	"github.com/nodeready/nodeready/internal/kube"
	"github.com/nodeready/nodeready/internal/kube/adapt"
)

// stubDNS is a dns check with a fixed outcome.
type stubDNS struct{ err error }

func (s stubDNS) Name() string              { return "dns" }
func (s stubDNS) Target() string            { return "kubernetes.default.svc.cluster.local" }
func (s stubDNS) Run(context.Context) error { return s.err }
func kubeDNSSlice(eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	s := endpointSlice("kube-dns-x1", "kube-dns", nil, eps...)
	s.Namespace = "kube-system"
	return s
}

// TestUnlessNoClusterDNS: a failing dns check is excused (ErrNoClusterDNS, a
// skip) only when the cluster DNS Service is known to have no ready endpoint.
func TestUnlessNoClusterDNS(t *testing.T) {
	resolveErr := errors.New(`resolve "kubernetes.default.svc.cluster.local": connection refused`)
	ready, notReady := new(true), new(false)
	tests := []struct {
		name      string
		dns       error
		objects   []runtime.Object
		forbidden bool
		excused   bool
		lists     int
	}{
		{name: "dns passes: no request", dns: nil, lists: 0},
		{name: "no ready endpoint anywhere: excused", dns: resolveErr,
			objects: []runtime.Object{kubeDNSSlice(endpoint("10.244.0.5", notReady))}, excused: true, lists: 1},
		{name: "a slice without endpoints: excused", dns: resolveErr,
			objects: []runtime.Object{kubeDNSSlice()}, excused: true, lists: 1},
		{name: "cluster DNS runs: the failure stands", dns: resolveErr,
			objects: []runtime.Object{kubeDNSSlice(endpoint("10.244.0.5", notReady), endpoint("10.244.0.6", ready))}, lists: 1},
		{name: "no slices (no such Service): the failure stands", dns: resolveErr, lists: 1},
		{name: "lookup forbidden: the failure stands", dns: resolveErr,
			objects: []runtime.Object{kubeDNSSlice()}, forbidden: true, lists: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(tt.objects...)
			if tt.forbidden {
				client.PrependReactor("list", "endpointslices", forbidden(schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}))
			}
			c := checks.NewUnlessNoClusterDNS(stubDNS{tt.dns}, adapt.Clientset(client), kubeDNS)
			assert.Equal(t, "dns", c.Name())
			assert.Equal(t, "kubernetes.default.svc.cluster.local", c.Target())

			res := checks.Execute(t.Context(), c, 5*time.Second)
			lists := 0
			for _, a := range client.Actions() {
				if a.Matches("list", "endpointslices") {
					assert.Equal(t, "kube-system", a.GetNamespace())
					lists++
				}
			}
			assert.Equal(t, tt.lists, lists, "EndpointSlice lists")
			switch {
			case tt.dns == nil:
				assert.True(t, res.Passed())
			case tt.excused:
				require.ErrorIs(t, res.Err, checks.ErrNoClusterDNS)
				assert.True(t, res.Skipped(), "an excused dns check is a skip, not a failure")
				assert.Contains(t, res.Err.Error(), "cannot be checked: no cluster DNS is running (kube-system/kube-dns has no ready endpoint)")
				assert.Contains(t, res.Err.Error(), "connection refused", "the DNS error is kept")
			default:
				require.Error(t, res.Err)
				assert.NotErrorIs(t, res.Err, checks.ErrNoClusterDNS)
				assert.Equal(t, "fail", res.Status())
				assert.ErrorIs(t, res.Err, tt.dns)
			}
		})
	}
}

// blockingDNS is a dns check that gets no answer: it waits for its context to end, as the Go
// resolver does for a Service whose packets kube-proxy rejects.
type blockingDNS struct{}

func (blockingDNS) Name() string   { return "dns" }
func (blockingDNS) Target() string { return "kubernetes.default.svc.cluster.local" }
func (blockingDNS) Run(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestUnlessNoClusterDNSAfterTheDeadline: a DNS query that uses up the check's time is still
// excused when the cluster DNS Service has no endpoint, so a real node's first agent can
// release it; the lookup is made against an API server (a client on an expired context
// sends nothing). A check aborted by the SIGTERM looks nothing up.
func TestUnlessNoClusterDNSAfterTheDeadline(t *testing.T) {
	var lists atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lists.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"EndpointSliceList","apiVersion":"discovery.k8s.io/v1","metadata":{},"items":[` +
			`{"metadata":{"name":"kube-dns-x1","namespace":"kube-system","labels":{"kubernetes.io/service-name":"kube-dns"}},"addressType":"IPv4","endpoints":[]}]}`))
	}))
	t.Cleanup(srv.Close)
	client, err := kube.NewForConfig(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	c := checks.NewUnlessNoClusterDNS(blockingDNS{}, client, kubeDNS)

	res := checks.Execute(t.Context(), c, 200*time.Millisecond)
	assert.ErrorIs(t, res.Err, checks.ErrNoClusterDNS, "excused after the deadline")
	assert.EqualValues(t, 1, lists.Load())

	ctx, cancel := context.WithCancel(t.Context())
	cancel() // the SIGTERM
	res = checks.Execute(ctx, c, 200*time.Millisecond)
	assert.NotErrorIs(t, res.Err, checks.ErrNoClusterDNS)
	assert.EqualValues(t, 1, lists.Load(), "no lookup after an abort")
}

// endingDNS is a dns check that gets no answer until its context ends, and says how it ended.
type endingDNS struct{ ended chan error }

func (endingDNS) Name() string   { return "dns" }
func (endingDNS) Target() string { return "kubernetes.default.svc.cluster.local" }
func (d endingDNS) Run(ctx context.Context) error {
	<-ctx.Done()
	d.ended <- ctx.Err()
	return ctx.Err()
}

// TestUnlessNoClusterDNSBesideASlowQuery: a query that has not answered soon is not waited
// for to its deadline when the EndpointSlices, looked at beside it, say that no cluster DNS
// runs: the query is ended (cancelled, not timed out) and the check excused, one lookup in
// all. When the Service has a ready endpoint, the slow query's failure stands, with no second
// lookup.
func TestUnlessNoClusterDNSBesideASlowQuery(t *testing.T) {
	for _, tt := range []struct {
		name    string
		slice   *discoveryv1.EndpointSlice
		timeout time.Duration
		excused bool
		ended   error
	}{
		{"no ready endpoint anywhere", kubeDNSSlice(endpoint("10.244.0.5", new(false))), time.Minute, true, context.Canceled},
		{"cluster DNS runs", kubeDNSSlice(endpoint("10.244.0.5", new(true))), 1500 * time.Millisecond, false, context.DeadlineExceeded},
	} {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(tt.slice)
			dns := endingDNS{ended: make(chan error, 1)}
			res := checks.Execute(t.Context(), checks.NewUnlessNoClusterDNS(dns, adapt.Clientset(client), kubeDNS), tt.timeout)
			assert.ErrorIs(t, <-dns.ended, tt.ended, "how the query ended")
			assert.Equal(t, tt.excused, errors.Is(res.Err, checks.ErrNoClusterDNS), "excused: %v", res.Err)
			assert.Len(t, client.Actions(), 1, "lookups of the Service")
		})
	}
}

// deafDNS is a dns check whose query ignores its context until released, as the Go resolver
// does until its attempt times out (resolv.conf's timeout, 5s by default).
type deafDNS struct{ released chan struct{} }

func (deafDNS) Name() string   { return "dns" }
func (deafDNS) Target() string { return "kubernetes.default.svc.cluster.local" }
func (d deafDNS) Run(context.Context) error {
	<-d.released
	return errors.New("i/o timeout")
}

// TestUnlessNoClusterDNSDoesNotWaitForADeafQuery: once the EndpointSlices say no cluster DNS
// runs, the check answers without waiting for a query that does not heed its cancellation.
func TestUnlessNoClusterDNSDoesNotWaitForADeafQuery(t *testing.T) {
	dns := deafDNS{released: make(chan struct{})}
	t.Cleanup(func() { close(dns.released) })
	c := checks.NewUnlessNoClusterDNS(dns, adapt.Clientset(fake.NewClientset(kubeDNSSlice())), kubeDNS)
	done := make(chan checks.Result, 1)
	go func() { done <- checks.Execute(t.Context(), c, time.Minute) }()
	select {
	case res := <-done:
		assert.ErrorIs(t, res.Err, checks.ErrNoClusterDNS)
	case <-time.After(30 * time.Second):
		t.Fatal("the check waited for a query that ignores its cancellation")
	}
}
