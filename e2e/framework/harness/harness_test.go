package harness_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodeready/nodeready/e2e/framework/harness"
	"github.com/nodeready/nodeready/internal/wellknown"
)

func TestScrape(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, "# HELP nodeready_rounds_total Rounds.\n# TYPE nodeready_rounds_total counter\n"+
			"nodeready_rounds_total 3\nnodeready_check_success{check=\"dns\"} 1\nnodeready_verified 0\n")
	}))
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")

	got, err := harness.Scrape(t.Context(), addr, "nodeready_rounds_total")
	require.NoError(t, err)
	assert.Equal(t, 3.0, got)
	got, err = harness.Scrape(t.Context(), addr, "nodeready_verified")
	require.NoError(t, err)
	assert.Equal(t, 0.0, got)

	_, err = harness.Scrape(t.Context(), addr, "nodeready_check_success")
	assert.ErrorContains(t, err, "no metric nodeready_check_success", "a labelled metric is not an unlabelled one")
}

// node returns a fleet node in the given state of its release.
func node(labelled, tainted, intact bool) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"pool": "a"}}}
	if labelled {
		n.Labels[wellknown.VerifiedLabel] = "true"
	}
	if tainted {
		n.Spec.Taints = append(n.Spec.Taints, wellknown.StartupTaint())
	}
	if intact {
		n.Labels[harness.ForeignLabel] = harness.ForeignLabelValue
		n.Spec.Taints = append(n.Spec.Taints, harness.ForeignTaints...)
	}
	return n
}

func TestWatchNodes(t *testing.T) {
	client := fake.NewClientset(node(false, true, true))
	// The fake API server ignores resource versions; its watch is driven by hand here, and
	// each event is taken before the next is sent.
	w := watch.NewFake()
	client.PrependWatchReactor("nodes", func(k8stesting.Action) (bool, watch.Interface, error) {
		return true, w, nil
	})
	h, err := harness.WatchNodes(t.Context(), client, "pool=a")
	require.NoError(t, err)
	t.Cleanup(h.Stop)
	require.Equal(t, []harness.NodeState{harness.Unverified}, h.States("n1"), "the first list is recorded before WatchNodes returns")

	halfReleased := node(true, true, true)
	w.Modify(halfReleased)
	w.Modify(halfReleased) // no change: not recorded twice
	w.Modify(node(true, false, false))
	w.Modify(node(true, false, true))

	ctx, cancel := context.WithTimeout(t.Context(), harness.WaitTimeout)
	defer cancel()
	require.NoError(t, h.WaitLatest(ctx, "n1", harness.Released))
	assert.Equal(t, []harness.NodeState{
		harness.Unverified,
		{Labelled: true, Tainted: true, Intact: true},
		{Labelled: true, Tainted: false, Intact: false},
		harness.Released,
	}, h.States("n1"))
	assert.Empty(t, h.States("n2"))

	h.Stop()
	h.Stop()
	assert.Len(t, h.States("n1"), 4, "states stay readable after Stop")
}
