package uninstall

import (
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodeready/nodeready/internal/config"
	"github.com/nodeready/nodeready/internal/kube/adapt"
	"github.com/nodeready/nodeready/internal/wellknown"
)

var (
	startup = wellknown.StartupTaint()
	extra   = corev1.Taint{Key: "readiness.k8s.io/nodeready", Effect: corev1.TaintEffectNoSchedule}
	other   = corev1.Taint{Key: "example.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}
	cfg     = config.Config{StartupTaints: []corev1.Taint{startup, extra}, VerifiedLabel: wellknown.VerifiedLabel, VerifiedLabelValue: "true"}
)

func node(name string, labels, annotations map[string]string, taints ...corev1.Taint) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations}, Spec: corev1.NodeSpec{Taints: taints}}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	return n
}

func get(t *testing.T, c *fake.Clientset, name string) *corev1.Node {
	t.Helper()
	n, err := c.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return n
}

// TestReleaseHeldThenDeleteTheDaemonSet: the held nodes lose their startup taints (every
// one of them, and no other taint) and get no label, with a Warning Event each; a node
// that is not held is not written; then the binding that taints new nodes and the
// DaemonSet are gone.
func TestReleaseHeldThenDeleteTheDaemonSet(t *testing.T) {
	verified := node("verified", map[string]string{wellknown.VerifiedLabel: "true"}, nil, other)
	c := fake.NewClientset(
		node("held", nil, nil, startup, other, extra),
		node("held-labelled", map[string]string{wellknown.VerifiedLabel: "true"}, nil, extra),
		verified,
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "nodeready"}},
		&admissionv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "nodeready-startup-taint"}},
	)
	err := New(adapt.Clientset(c), cfg, zerolog.Nop()).Run(t.Context(), Options{ReleaseHeld: true, DaemonSet: "kube-system/nodeready", CreationPolicyBinding: "nodeready-startup-taint"})
	require.NoError(t, err)

	assert.Equal(t, []corev1.Taint{other}, get(t, c, "held").Spec.Taints)
	assert.NotContains(t, get(t, c, "held").Labels, wellknown.VerifiedLabel, "released unverified")
	assert.Empty(t, get(t, c, "held-labelled").Spec.Taints)
	assert.Equal(t, verified.Spec.Taints, get(t, c, "verified").Spec.Taints)
	for _, a := range c.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok {
			assert.NotEqual(t, "verified", p.GetName(), "a node that is not held was written")
		}
	}
	events, err := c.EventsV1().Events("default").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	var about []string
	for _, e := range events.Items {
		assert.Equal(t, string(wellknown.ReleasedAtUninstall), e.Reason)
		assert.Equal(t, corev1.EventTypeWarning, e.Type)
		about = append(about, e.Regarding.Name)
	}
	assert.ElementsMatch(t, []string{"held", "held-labelled"}, about)
	_, err = c.AppsV1().DaemonSets("kube-system").Get(t.Context(), "nodeready", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the DaemonSet is left")
	_, err = c.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Get(t.Context(), "nodeready-startup-taint", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the creation-time binding is left")
}

// TestNodeNotReleasedKeepsItsAgent: a held node that cannot be released stops the
// uninstall before the DaemonSet goes, so its agent stays; a run after the cause is gone
// finishes.
func TestNodeNotReleasedKeepsItsAgent(t *testing.T) {
	c := fake.NewClientset(node("held", nil, nil, startup), &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "nodeready"}})
	refused := true
	c.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if refused {
			return true, nil, apierrors.NewForbidden(corev1.Resource("nodes"), "held", errors.New("RBAC"))
		}
		return false, nil, nil
	})
	opts := Options{ReleaseHeld: true, DaemonSet: "kube-system/nodeready"}
	err := New(adapt.Clientset(c), cfg, zerolog.Nop()).Run(t.Context(), opts)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "release node held")
	_, err = c.AppsV1().DaemonSets("kube-system").Get(t.Context(), "nodeready", metav1.GetOptions{})
	require.NoError(t, err, "the DaemonSet of a node still held was deleted")

	refused = false
	require.NoError(t, New(adapt.Clientset(c), cfg, zerolog.Nop()).Run(t.Context(), opts))
	assert.Empty(t, get(t, c, "held").Spec.Taints)
}

// TestRemoveMarks: with RemoveMarks, nodeready's label, annotations (a release by hand's
// too) and condition go from every node; the rest of each node stays.
func TestRemoveMarks(t *testing.T) {
	n := node("verified", map[string]string{wellknown.VerifiedLabel: "true", "pool": "gpu"},
		map[string]string{wellknown.ReleasedAtAnnotation(wellknown.VerifiedLabel): "2026-11-20T08:00:00Z",
			wellknown.DurationAnnotation(wellknown.VerifiedLabel): "4s", "example.com/owner": "team-a",
			wellknown.ReleasedByAnnotation(wellknown.VerifiedLabel): "alice", wellknown.ReleasedByTimeAnnotation(wellknown.VerifiedLabel): "2026-11-20T09:00:00Z"}, other)
	n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: wellknown.ConditionType, Status: corev1.ConditionTrue, Reason: "Verified"})
	c := fake.NewClientset(n, node("untouched", map[string]string{"pool": "cpu"}, nil))
	require.NoError(t, New(adapt.Clientset(c), cfg, zerolog.Nop()).Run(t.Context(), Options{RemoveMarks: true}))

	got := get(t, c, "verified")
	assert.Equal(t, map[string]string{"pool": "gpu"}, got.Labels)
	assert.Equal(t, map[string]string{"example.com/owner": "team-a"}, got.Annotations)
	assert.False(t, slices.ContainsFunc(got.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == wellknown.ConditionType }))
	assert.True(t, slices.ContainsFunc(got.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == corev1.NodeReady }))
	assert.Equal(t, []corev1.Taint{other}, got.Spec.Taints)
	for _, a := range c.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok {
			assert.NotEqual(t, "untouched", p.GetName(), "a node without marks was written")
		}
	}
}

func TestFlags(t *testing.T) {
	o, err := Flags([]string{"-release-held", "-daemonset=kube-system/nodeready", "-wait-for-agents=1m"}, nil)
	require.NoError(t, err)
	assert.Equal(t, Options{ReleaseHeld: true, DaemonSet: "kube-system/nodeready", WaitForAgents: time.Minute, WaitForPods: DefaultWaitForPods}, o)
	o, err = Flags([]string{"-release-held", "-daemonset=kube-system/nodeready", "-wait-for-pods=2m"}, nil)
	require.NoError(t, err)
	assert.Equal(t, 2*time.Minute, o.WaitForPods)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-release-held", "-daemonset=nodeready"}, "namespace/name"},
		// Deleting the agents while nodes are held would strand them.
		{[]string{"-daemonset=kube-system/nodeready"}, "needs -release-held"},
		{[]string{"-release-held", "-wait-for-pods=0s"}, "-wait-for-pods 0s"},
	} {
		_, err = Flags(tc.args, io.Discard)
		assert.ErrorContains(t, err, tc.want, tc.args)
	}
}

// TestDaemonSetWithoutReleaseHeldRefused: Run refuses to delete the DaemonSet without
// releasing the held nodes first, and writes nothing.
func TestDaemonSetWithoutReleaseHeldRefused(t *testing.T) {
	c := fake.NewClientset(node("held", nil, nil, startup), &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "nodeready"}})
	err := New(adapt.Clientset(c), cfg, zerolog.Nop()).Run(t.Context(), Options{DaemonSet: "kube-system/nodeready"})
	require.Error(t, err)
	_, err = c.AppsV1().DaemonSets("kube-system").Get(t.Context(), "nodeready", metav1.GetOptions{})
	require.NoError(t, err, "the DaemonSet of a held node was deleted")
	assert.Equal(t, []corev1.Taint{startup}, get(t, c, "held").Spec.Taints)
}

// TestPodOnADeadNodeDoesNotHangTheUninstall: an agent pod whose node's kubelet is down is
// never confirmed gone, and the foreground deletion keeps the DaemonSet until it is: the
// uninstall waits WaitForPods, then goes on and releases the node tainted meanwhile, and
// finishes without an error.
func TestPodOnADeadNodeDoesNotHangTheUninstall(t *testing.T) {
	selector := map[string]string{"app.kubernetes.io/name": "nodeready"}
	c := fake.NewClientset(
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "nodeready"},
			Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: selector}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "nodeready-dead", Labels: selector}, Spec: corev1.PodSpec{NodeName: "dead"}},
	)
	deleted := 0
	c.PrependReactor("delete", "daemonsets", func(k8stesting.Action) (bool, runtime.Object, error) {
		deleted++
		// The API server marks it for deletion; the pod on the dead node keeps it there.
		// A node gets the startup taint meanwhile.
		return true, nil, c.Tracker().Add(node("joined", nil, nil, startup))
	})
	start := time.Now()
	err := New(adapt.Clientset(c), cfg, zerolog.Nop()).Run(t.Context(), Options{ReleaseHeld: true, DaemonSet: "kube-system/nodeready", WaitForPods: 2 * time.Second})
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 10*time.Second, "the wait for the pods is bounded")
	assert.Equal(t, 1, deleted)
	assert.Empty(t, get(t, c, "joined").Spec.Taints, "the node tainted while the DaemonSet went was not released")
}
