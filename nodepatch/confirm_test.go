package nodepatch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// answerPatchWith makes the first PATCH fail with err, after storing it when
// stored is set: the API server wrote the node but the answer never came.
func answerPatchWith(client *fake.Clientset, err error, stored bool) {
	apply := k8stesting.ObjectReaction(client.Tracker())
	answered := false
	client.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if answered {
			return false, nil, nil
		}
		answered = true
		if stored {
			if _, _, err := apply(a); err != nil {
				return true, nil, err
			}
		}
		return true, nil, err
	})
}

// TestReleaseWithoutAnswer: a PATCH that gets no answer (a timeout, a lost
// connection) or a server error may have been stored: Release says so
// (ErrUnknownOutcome) instead of a misconfiguration, and Confirm finds out
// with one read. An answer that turns the write down is no unknown.
func TestReleaseWithoutAnswer(t *testing.T) {
	gr := corev1.Resource("nodes")
	annotations := map[string]string{"node-ready/verified-at": "2026-11-23T10:00:00Z"}
	tests := []struct {
		name    string
		err     error
		stored  bool
		unknown bool
	}{
		{name: "deadline, stored", err: context.DeadlineExceeded, stored: true, unknown: true},
		{name: "deadline, not stored", err: context.DeadlineExceeded, unknown: true},
		{name: "connection lost, stored", err: errors.New("http2: client connection lost"), stored: true, unknown: true},
		{name: "504, stored", err: apierrors.NewTimeoutError("request did not complete within 1m0s", 0), stored: true, unknown: true},
		{name: "500, not stored", err: apierrors.NewInternalError(errors.New("etcdserver: leader changed")), unknown: true},
		{name: "429 is not stored", err: apierrors.NewTooManyRequests("please try again later", 1)},
		{name: "403 is a refusal", err: apierrors.NewForbidden(gr, nodeName, errors.New("denied by policy"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, client := newPatcher(t, newNode(nil, startup, foreign))
			answerPatchWith(client, tt.err, tt.stored)
			_, err := p.Release(t.Context(), annotations)
			require.Error(t, err)
			assert.Equal(t, tt.unknown, errors.Is(err, ErrUnknownOutcome), "%v", err)
			assert.Equal(t, []string{"get", "patch"}, verbs(client), "not written again on a guess")
			if !tt.unknown {
				return
			}
			landed, err := p.Confirm(t.Context(), annotations)
			require.NoError(t, err)
			assert.Equal(t, tt.stored, landed)
			assert.Equal(t, []string{"get", "patch", "get"}, verbs(client), "one read")
			if tt.stored {
				assert.NotEmpty(t, p.confirmedRV, "Settle follows from the node as confirmed")
				assert.Equal(t, []corev1.Taint{foreign}, getNode(t, client).Spec.Taints)
			}
		})
	}
}

// TestConfirmFromTheWatch: the watch the agent keeps on its node shows the
// write that got no answer, with the annotations it carried: no read. A
// node the watch shows verified by another write is read to be sure.
func TestConfirmFromTheWatch(t *testing.T) {
	for _, tt := range []struct {
		name  string
		asked map[string]string
		reads int
	}{
		{name: "this write", asked: map[string]string{"node-ready/verified-at": "2026-11-23T10:00:00Z"}, reads: 0},
		{name: "another write", asked: map[string]string{"node-ready/verified-at": "2026-11-23T10:05:00Z"}, reads: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, client := newPatcher(t, newNode(nil, startup))
			watching(t, p, client)
			answerPatchWith(client, context.DeadlineExceeded, true)
			_, err := p.Release(t.Context(), map[string]string{"node-ready/verified-at": "2026-11-23T10:00:00Z"})
			require.ErrorIs(t, err, ErrUnknownOutcome)
			require.Eventually(t, func() bool {
				n := p.watched()
				return n != nil && p.Verified(n)
			}, 5*time.Second, time.Millisecond, "the watch shows the write")

			before := len(client.Actions())
			landed, err := p.Confirm(t.Context(), tt.asked)
			require.NoError(t, err)
			assert.True(t, landed)
			assert.Len(t, client.Actions()[before:], tt.reads)
		})
	}
}
