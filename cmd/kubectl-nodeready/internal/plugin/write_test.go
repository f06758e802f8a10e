package plugin

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodeready/nodeready/internal/golden"
	"github.com/nodeready/nodeready/internal/wellknown"
)

func getNode(t *testing.T, client *fake.Clientset, name string) *corev1.Node {
	t.Helper()
	n, err := client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return n
}

var nodesResource = corev1.SchemeGroupVersion.WithResource("nodes")

// trackedNode reads a node from the fake's tracker, as a reactor may.
func trackedNode(t *testing.T, client *fake.Clientset, name string) *corev1.Node {
	t.Helper()
	obj, err := client.Tracker().Get(nodesResource, "", name)
	require.NoError(t, err)
	return obj.(*corev1.Node).DeepCopy()
}

// patches returns the JSON Patches the plugin sent, decoded.
func patches(t *testing.T, client *fake.Clientset) [][]operation {
	t.Helper()
	var out [][]operation
	for _, a := range client.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok {
			var ops []operation
			require.NoError(t, json.Unmarshal(p.GetPatch(), &ops))
			out = append(out, ops)
		}
	}
	return out
}

// invalid is the API server's answer to a JSON Patch whose test failed.
func invalid(name string) error {
	return apierrors.NewInvalid(schema.GroupKind{Kind: "Node"}, name, field.ErrorList{field.Invalid(field.NewPath("spec", "taints"), nil, "the test operation failed")})
}

// TestRelease: a held node loses its startup taints (every other taint stays), gets the
// label and the record of who released it and when, in one JSON Patch that tests the
// taint list, and a Warning Event says so.
func TestRelease(t *testing.T) {
	client := newClient(fleet()...)
	r := run(t, client, "release", "a-held")
	require.NoError(t, r.err)
	assert.Empty(t, r.errOut)
	golden.Assert(t, "release", r.out)

	n := getNode(t, client, "a-held")
	assert.Equal(t, []corev1.Taint{{Key: "example.com/dedicated", Value: "infra", Effect: corev1.TaintEffectPreferNoSchedule}}, n.Spec.Taints, "only the startup taint is gone")
	assert.Equal(t, "true", n.Labels[wellknown.VerifiedLabel])
	assert.Equal(t, "infra", n.Labels["example.com/team"], "other labels stay")
	assert.Equal(t, "alice@example.com", n.Annotations[wellknown.ReleasedByAnnotation(wellknown.VerifiedLabel)])
	assert.Equal(t, "2026-05-01T12:00:00Z", n.Annotations[wellknown.ReleasedByTimeAnnotation(wellknown.VerifiedLabel)])
	assert.NotContains(t, n.Annotations, wellknown.ReleasedAtAnnotation(wellknown.VerifiedLabel), "a release by hand is no verification")

	ps := patches(t, client)
	require.Len(t, ps, 1, "one write")
	assert.Equal(t, operation{Op: "test", Path: "/spec/taints", Value: []any{
		map[string]any{"key": "example.com/dedicated", "value": "infra", "effect": "PreferNoSchedule"},
		map[string]any{"key": "node-ready/unverified", "value": "true", "effect": "NoSchedule"},
	}}, ps[0][0], "the taint list is tested as read")
	assert.Equal(t, "replace", ps[0][1].Op)

	events, err := client.EventsV1().Events(metav1.NamespaceDefault).List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, events.Items, 1)
	e := events.Items[0]
	assert.Equal(t, string(wellknown.ReleasedByHand), e.Reason)
	assert.Equal(t, corev1.EventTypeWarning, e.Type)
	assert.Equal(t, wellknown.PluginController, e.ReportingController)
	assert.Equal(t, corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: "a-held", UID: "uid-a-held"}, e.Regarding)
	assert.Equal(t, "Released by hand by alice@example.com with kubectl nodeready release, without verification: removed node-ready/unverified=true:NoSchedule, labelled node-ready/verified=true", e.Note)

	// status and why tell it afterwards.
	r = run(t, client, "why", "a-held")
	require.NoError(t, r.err)
	assert.Contains(t, r.out, "State:             hand-released since 0s (2026-05-01T12:00:00Z)")
	assert.Contains(t, r.out, "Released by hand:  by alice@example.com, 0s ago (2026-05-01T12:00:00Z)")
	assert.Regexp(t, `0s +Warning +ReleasedByHand +1 +kubectl-nodeready +Released by hand by alice@example.com`, r.out)
}

// TestReleaseRefuses: a node that is not held is not written, unless --force labels one
// nodeready does not hold; a released node never is.
func TestReleaseRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, node, err string
		force           bool
	}{
		{"verified", "f-verified", "refused: node f-verified is released already (node-ready/verified=true, no startup taint: verified)", false},
		{"verified, forced", "f-verified", "refused: node f-verified is released already (node-ready/verified=true, no startup taint: verified)", true},
		{"failed open", "g-failed-open", "refused: node g-failed-open is released already (node-ready/verified=failed-open, no startup taint: failed-open)", true},
		{"not held", "i-not-managed", "refused: node i-not-managed is not held: it carries no startup taint (node-ready/unverified:NoSchedule; state not-managed). --force labels it anyway, so an agent checking it leaves", false},
		{"re-verifying without the taint", "e-reverifying-untainted", "refused: node e-reverifying-untainted is not held: it carries no startup taint (node-ready/unverified:NoSchedule; state re-verifying). --force labels it anyway, so an agent checking it leaves", false},
		{"no such node", "nope", `get node nope: nodes "nope" not found`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := newClient(fleet()...)
			args := []string{"release", tc.node}
			if tc.force {
				args = append(args, "--force")
			}
			r := run(t, client, args...)
			require.EqualError(t, r.err, tc.err)
			assert.Equal(t, tc.err != `get node nope: nodes "nope" not found`, errors.Is(r.err, ErrRefused))
			assert.Empty(t, patches(t, client), "nothing written")
			assert.Empty(t, r.out)
		})
	}

	t.Run("forced on a node nodeready does not hold", func(t *testing.T) {
		client := newClient(fleet()...)
		r := run(t, client, "release", "i-not-managed", "--force")
		require.NoError(t, r.err)
		assert.Equal(t, "node/i-not-managed released by hand: removed none, labelled node-ready/verified=true, recorded as released by alice@example.com at 2026-05-01T12:00:00Z\n", r.out)
		n := getNode(t, client, "i-not-managed")
		assert.Equal(t, "true", n.Labels[wellknown.VerifiedLabel])
		assert.Empty(t, n.Spec.Taints)
		ps := patches(t, client)
		require.Len(t, ps, 1)
		for _, op := range ps[0] {
			assert.NotEqual(t, "/spec/taints", op.Path, "no taint written where none was removed")
		}
	})
}

// TestReleaseWaitsForKarpenter: a Karpenter node not registered yet is refused, as the agent
// waits for it: Karpenter would put its startupTaints back, with no agent left to remove them.
func TestReleaseWaitsForKarpenter(t *testing.T) {
	n := node("k", nodeOpts{created: time.Minute, startup: true})
	n.Labels["karpenter.sh/nodepool"] = "default"
	client := newClient(n)
	r := run(t, client, "release", "k")
	require.ErrorIs(t, r.err, ErrRefused)
	assert.ErrorContains(t, r.err, "node k is Karpenter's and not registered yet (no karpenter.sh/registered=true)")
	assert.Empty(t, patches(t, client))

	r = run(t, client, "release", "k", "--force")
	require.NoError(t, r.err)
	assert.Empty(t, getNode(t, client, "k").Spec.Taints)

	n = node("r", nodeOpts{created: time.Minute, startup: true})
	n.Labels["karpenter.sh/nodepool"] = "default"
	n.Labels["karpenter.sh/registered"] = "true"
	require.NoError(t, run(t, newClient(n), "release", "r").err, "a registered node is released")
}

// TestReleaseKeepsAConcurrentChange: another writer changes the taints between the read
// and the write; the test of the taint list fails (422), the plugin reads again, and the
// other writer's taint survives the release.
func TestReleaseKeepsAConcurrentChange(t *testing.T) {
	client := newClient(fleet()...)
	other := corev1.Taint{Key: "example.com/maintenance", Value: "soon", Effect: corev1.TaintEffectNoSchedule}
	raced := false
	client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if raced {
			return false, nil, nil
		}
		raced = true
		// The other writer's change lands first; the plugin's test no longer holds.
		// Through the tracker: the clientset is locked while its reactors run.
		n := trackedNode(t, client, "a-held")
		n.Spec.Taints = append(n.Spec.Taints, other)
		require.NoError(t, client.Tracker().Update(nodesResource, n, ""))
		return true, nil, invalid("a-held")
	})
	r := run(t, client, "release", "a-held")
	require.NoError(t, r.err)

	n := getNode(t, client, "a-held")
	assert.Equal(t, []corev1.Taint{{Key: "example.com/dedicated", Value: "infra", Effect: corev1.TaintEffectPreferNoSchedule}, other}, n.Spec.Taints)
	assert.Equal(t, "true", n.Labels[wellknown.VerifiedLabel])
	ps := patches(t, client)
	require.Len(t, ps, 2, "the lost lock, then the write from a fresh read")
	assert.Len(t, ps[1][0].Value, 3, "the second test holds the other writer's taint")
}

// TestReleaseRenamedKeys: with EXTRA_TAINTS, every startup taint goes in the one write,
// and the label and the record follow VERIFIED_LABEL.
func TestReleaseRenamedKeys(t *testing.T) {
	n := node("n", nodeOpts{created: time.Hour})
	n.Spec.Taints = []corev1.Taint{
		{Key: "example.com/unverified", Value: "x", Effect: corev1.TaintEffectNoSchedule},
		{Key: "readiness.k8s.io/net", Effect: corev1.TaintEffectNoSchedule},
		{Key: "readiness.k8s.io/net", Effect: corev1.TaintEffectNoExecute},
	}
	client := newClient(n, configMap(map[string]string{"TAINT_KEY": "example.com/unverified", "EXTRA_TAINTS": "readiness.k8s.io/net:NoSchedule",
		"VERIFIED_LABEL": "example.com/ready", "VERIFIED_LABEL_VALUE": "yes"}))
	r := run(t, client, "release", "n")
	require.NoError(t, r.err)
	assert.Equal(t, "node/n released by hand: removed example.com/unverified=x:NoSchedule, readiness.k8s.io/net:NoSchedule, labelled example.com/ready=yes, recorded as released by alice@example.com at 2026-05-01T12:00:00Z\n", r.out)
	got := getNode(t, client, "n")
	assert.Equal(t, []corev1.Taint{{Key: "readiness.k8s.io/net", Effect: corev1.TaintEffectNoExecute}}, got.Spec.Taints, "the same key with another effect is not a startup taint")
	assert.Equal(t, "yes", got.Labels["example.com/ready"])
	assert.Equal(t, "alice@example.com", got.Annotations["example.com/ready-released-by"])
}

// TestReleaseExternalTaint: with TAINT_OWNER=external the release warns that the taint's
// owner may put it back.
func TestReleaseExternalTaint(t *testing.T) {
	client := newClient(node("n", nodeOpts{created: time.Hour, startup: true}), configMap(map[string]string{"TAINT_OWNER": "external"}))
	r := run(t, client, "release", "n")
	require.NoError(t, r.err)
	assert.Contains(t, r.errOut, "Warning: TAINT_OWNER is external")
}

// TestReleaseEventLost: an Event that cannot be written is a warning; the release stands.
func TestReleaseEventLost(t *testing.T) {
	client := newClient(fleet()...)
	client.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, "", errors.New("RBAC"))
	})
	r := run(t, client, "release", "b-new")
	require.NoError(t, r.err)
	assert.Contains(t, r.errOut, "Warning: could not send the Event ReleasedByHand about node b-new")
	assert.Equal(t, "true", getNode(t, client, "b-new").Labels[wellknown.VerifiedLabel])
}

// TestReverify: the label goes, with the record of a release by hand; what the agent does
// next follows REVERIFY_TAINT and the node's completion record.
func TestReverify(t *testing.T) {
	for _, tc := range []struct {
		name, node, reverifyTaint string
	}{
		{"verified, REVERIFY_TAINT", "f-verified", "true"},
		{"verified, no REVERIFY_TAINT", "f-verified", "false"},
		{"hand-released, never verified", "h-hand-released", "true"},
		{"failed open", "g-failed-open", "true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := fleet()
			objs[0] = configMap(map[string]string{"REVERIFY_TAINT": tc.reverifyTaint})
			client := newClient(objs...)
			before := getNode(t, client, tc.node)
			r := run(t, client, "reverify", tc.node)
			require.NoError(t, r.err)
			golden.Assert(t, "reverify-"+tc.node+"-"+tc.reverifyTaint, r.out)
			n := getNode(t, client, tc.node)
			assert.NotContains(t, n.Labels, wellknown.VerifiedLabel)
			for _, a := range wellknown.HandReleaseAnnotations(wellknown.VerifiedLabel) {
				assert.NotContains(t, n.Annotations, a)
			}
			assert.Equal(t, before.Annotations[wellknown.ReleasedAtAnnotation(wellknown.VerifiedLabel)], n.Annotations[wellknown.ReleasedAtAnnotation(wellknown.VerifiedLabel)], "the completion record stays: it is what REVERIFY_TAINT reads")
			assert.Equal(t, before.Spec.Taints, n.Spec.Taints, "the agent puts the taint back, not the plugin")
			ps := patches(t, client)
			require.Len(t, ps, 1)
			assert.Equal(t, operation{Op: "test", Path: "/metadata/labels/node-ready~1verified", Value: before.Labels[wellknown.VerifiedLabel]}, ps[0][0])
		})
	}
}

// TestReverifyRefuses: a node without the label, and one where an agent pod still runs
// (its settle window would put the label back), unless --force.
func TestReverifyRefuses(t *testing.T) {
	objs := append(fleet(), agent("nodeready-zz", "f-verified", corev1.PodRunning, 0))
	for _, tc := range []struct{ node, err string }{
		{"a-held", "refused: node a-held has no label node-ready/verified: nothing to re-verify (state held)"},
		{"e-reverifying-untainted", "refused: node e-reverifying-untainted has no label node-ready/verified: nothing to re-verify (state re-verifying)"},
		{"f-verified", "refused: the agent pod kube-system/nodeready-zz still runs on node f-verified: within its SETTLE_TIME after a release it puts a removed label back. Run this again once it is gone, or with --force"},
	} {
		t.Run(tc.node, func(t *testing.T) {
			client := newClient(objs...)
			r := run(t, client, "reverify", tc.node)
			require.EqualError(t, r.err, tc.err)
			assert.ErrorIs(t, r.err, ErrRefused)
			assert.Empty(t, patches(t, client))
		})
	}
	client := newClient(objs...)
	r := run(t, client, "reverify", "f-verified", "--force")
	require.NoError(t, r.err)
	assert.NotContains(t, getNode(t, client, "f-verified").Labels, wellknown.VerifiedLabel)
}

// TestReverifyKeepsAConcurrentChange: the label changed between the read and the write
// (its test fails, 422): the plugin reads again and removes the label as it is now.
func TestReverifyKeepsAConcurrentChange(t *testing.T) {
	client := newClient(fleet()...)
	raced := false
	client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if raced {
			return false, nil, nil
		}
		raced = true
		n := trackedNode(t, client, "f-verified")
		n.Labels[wellknown.VerifiedLabel] = wellknown.FailedOpenValue
		n.Labels["example.com/new"] = "x"
		require.NoError(t, client.Tracker().Update(nodesResource, n, ""))
		return true, nil, invalid("f-verified")
	})
	r := run(t, client, "reverify", "f-verified")
	require.NoError(t, r.err)
	n := getNode(t, client, "f-verified")
	assert.NotContains(t, n.Labels, wellknown.VerifiedLabel)
	assert.Equal(t, "x", n.Labels["example.com/new"])
	ps := patches(t, client)
	require.Len(t, ps, 2)
	assert.Equal(t, wellknown.FailedOpenValue, ps[1][0].Value)
}

// TestUser: the release records the user the API server says the kubeconfig acts as
// (SelfSubjectReview, impersonation included), else the kubeconfig context's user entry.
func TestUser(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "config")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: ops-admin, user: {token: x}}]
contexts: [{name: prod, context: {cluster: c, user: ops-admin}}]
current-context: prod
`), 0o600))
	var errOut bytes.Buffer
	o := &Options{streams: genericiooptions.IOStreams{ErrOut: &errOut}, configFlags: newKubeconfigFlags()}
	o.configFlags.explicitPath = kubeconfig

	client := newClient()
	client.PrependReactor("create", "selfsubjectreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{
			UserInfo: authenticationv1.UserInfo{Username: "oidc:carol@example.com"}}}, nil
	})
	assert.Equal(t, "oidc:carol@example.com", o.user(t.Context(), asClient(client)))
	assert.Empty(t, errOut.String())

	client = newClient()
	client.PrependReactor("create", "selfsubjectreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "authentication.k8s.io", Resource: "selfsubjectreviews"}, "", errors.New("no"))
	})
	assert.Equal(t, "kubeconfig:ops-admin", o.user(t.Context(), asClient(client)))
	assert.Contains(t, errOut.String(), `Warning: the API server did not say who you are`)
	assert.Contains(t, errOut.String(), `recording the kubeconfig's user "ops-admin"`)
}
