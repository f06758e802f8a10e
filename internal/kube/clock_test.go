package kube_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/nodeready/nodeready/internal/kube"
	"github.com/nodeready/nodeready/internal/kube/adapt"
)

// TestClockRecordsTheAPIServersDate: every response the clients receive leaves
// its Date, with the local times around it, and the bounds drawn from it hold
// the API server's offset, whatever the server chose to send.
func TestClockRecordsTheAPIServersDate(t *testing.T) {
	ahead := 90 * time.Minute
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Date", time.Now().Add(ahead).UTC().Format(http.TimeFormat))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Node","apiVersion":"v1","metadata":{"name":"node-a"}}`))
	}))
	t.Cleanup(srv.Close)
	client, err := kube.NewForConfig(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	clock := kube.ClockOf(client)
	require.NotNil(t, clock)
	_, ok := clock.Latest()
	assert.False(t, ok, "no sample before a request")

	before := time.Now()
	_, err = client.CoreV1().Nodes().Get(t.Context(), "node-a", metav1.GetOptions{})
	require.NoError(t, err)
	s, ok := clock.Latest()
	require.True(t, ok)
	assert.False(t, s.Sent.Before(before))
	assert.False(t, s.Received.Before(s.Sent))
	lo, hi := s.Offset()
	assert.LessOrEqual(t, lo, ahead)
	assert.GreaterOrEqual(t, hi, ahead)
	assert.Less(t, hi-lo, 2*time.Second, "one second of Date's resolution plus a loopback round trip")
}

// TestClockWaitsForASampleInFlight: Since returns a sample that arrives while it
// waits, and gives up when its context ends.
func TestClockWaitsForASampleInFlight(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		<-release
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(srv.Close)
	client, err := kube.NewForConfig(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	clock := kube.ClockOf(client)

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, ok := clock.Since(ctx, time.Now())
	assert.False(t, ok, "nothing arrived")

	start := time.Now()
	go func() { _, _ = client.Discovery().ServerGroups(context.Background()) }()
	time.AfterFunc(20*time.Millisecond, func() { close(release) })
	s, ok := clock.Since(t.Context(), start)
	require.True(t, ok)
	assert.False(t, s.Received.Before(start))
}

// TestClockOfAFakeClient: a client without HTTP records no Date, and says so
// with nil.
func TestClockOfAFakeClient(t *testing.T) {
	assert.Nil(t, kube.ClockOf(adapt.Clientset(fake.NewClientset())))
}
