package agent

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestShutdownWaitsForEvents: the Verified Event is emitted just before the
// process ends; the shutdown lets its write finish instead of dropping it.
func TestShutdownWaitsForEvents(t *testing.T) {
	client := fake.NewClientset()
	var created atomic.Int32
	client.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		time.Sleep(300 * time.Millisecond) // a slow API server
		created.Add(1)
		return false, nil, nil
	})
	recorder, shutdown := newRecorder(client)
	recorder.Eventf(nodeRef("node-a"), nil, corev1.EventTypeNormal, "Verified", "Release", "All checks passed")
	shutdown()
	assert.Equal(t, int32(1), created.Load(), "the Event was written before the shutdown returned")
}
