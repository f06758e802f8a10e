package agent

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodeready/nodeready/nodepatch"
)

// TestRefusedReadsBoundedPerRound: with RBAC gone before the agent first read its node
// (its ClusterRoleBinding deleted), every read and write of the node is refused. A round
// then costs the release's read and one try at the condition (a read, for the condition
// as the node shows it): no further read to learn whether the node is held, no second
// try at the condition in the same round.
func TestRefusedReadsBoundedPerRound(t *testing.T) {
	const rounds = 20
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "node-ready/unverified", Value: "true", Effect: corev1.TaintEffectNoSchedule}}}})
	client.PrependReactor("*", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("nodes"), "node-a", assert.AnError)
	})
	client.PrependWatchReactor("nodes", func(k8stesting.Action) (bool, watch.Interface, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("nodes"), "node-a", assert.AnError)
	})
	a := testAgent(t, nodepatch.New(client, "node-a", nodepatch.Spec{
		Taints: []corev1.Taint{{Key: "node-ready/unverified", Value: "true", Effect: corev1.TaintEffectNoSchedule}}, LabelKey: "node-ready/verified", LabelValue: "true"}),
		&fakeCheck{name: "dns"})
	a.cfg.MaxRetries = 2
	_, _ = runAgent(t, a)

	waitFor(t, "failure recorded", func() bool { return testutil.ToFloat64(a.metrics.failures) == 1 })
	r0, from := testutil.ToFloat64(a.metrics.rounds), len(client.Actions())
	waitFor(t, "rounds", func() bool { return testutil.ToFloat64(a.metrics.rounds) >= r0+rounds })
	counts := map[string]int{}
	for _, act := range client.Actions()[from:] {
		counts[act.GetVerb()+" "+act.GetResource().Resource+" "+act.GetSubresource()]++
	}
	n := int(testutil.ToFloat64(a.metrics.rounds) - r0)
	// The informer's own list and watch, refused, are retried at its backoff (800 ms and up).
	assert.LessOrEqual(t, counts["get nodes "], 2*(n+1)+4, "reads of the node in %d rounds: %v", n, counts)
	assert.Zero(t, counts["patch nodes "]+counts["patch nodes status"], "writes after refused reads: %v", counts)
	assert.False(t, a.verified.Load())
}
