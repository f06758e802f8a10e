package security

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/controlplane"
)

// access is one request the agent's ServiceAccount might make.
type access struct {
	verb, group, resource, namespace string
}

func (a access) String() string {
	ns := a.namespace
	if ns == "" {
		ns = "(all namespaces)"
	}
	return fmt.Sprintf("%s %s.%s in %s", a.verb, a.resource, a.group, ns)
}

// allowed asks the API server's authorizer, as `kubectl auth can-i --as` does.
func allowed(t *testing.T, c kubernetes.Interface, a access) bool {
	t.Helper()
	sar, err := c.AuthorizationV1().SubjectAccessReviews().Create(t.Context(), &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   "system:serviceaccount:" + namespace + ":" + serviceAccount,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: a.verb, Group: a.group, Resource: a.resource, Namespace: a.namespace,
			},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return sar.Status.Allowed
}

// TestDefaultInstallReadsNoPodsOrDaemonSets holds that `kubectl apply -f manifests/` gives
// the agent, which runs on every new and not yet trusted node, no read of pods (their
// environment included), DaemonSets or CSINodes: the gates that need them come with their
// own files in manifests/gates/.
func TestDefaultInstallReadsNoPodsOrDaemonSets(t *testing.T) {
	cp := framework.New(t, framework.Options{ControlPlaneOnly: true}).ControlPlane()
	admin := cp.Client()
	applyManifests(t, cp)

	granted := []access{
		{"get", "", "nodes", ""}, {"patch", "", "nodes", ""}, {"watch", "", "nodes", ""},
		{"list", "discovery.k8s.io", "endpointslices", "default"},
	}
	gated := []access{
		{"list", "", "pods", ""}, {"list", "", "pods", "kube-system"}, {"get", "", "pods", "kube-system"},
		{"list", "apps", "daemonsets", ""}, {"get", "apps", "daemonsets", "kube-system"},
		{"get", "storage.k8s.io", "csinodes", ""},
	}
	for _, a := range granted {
		assert.True(t, allowed(t, admin, a), "the default install must allow %s", a)
	}
	for _, a := range gated {
		assert.False(t, allowed(t, admin, a), "the default install allows %s", a)
	}

	// Each gate's file grants what that gate reads. The authorizer reads RBAC from its
	// informers, so a grant shows a moment after kubectl apply returns.
	apply(t, cp, "daemonsets.yaml")
	for _, a := range []access{{"list", "", "pods", ""}, {"list", "apps", "daemonsets", ""}, {"get", "apps", "daemonsets", "kube-system"}} {
		assert.NoError(t, waitAllowed(t, admin, a), "manifests/gates/daemonsets.yaml must allow %s", a)
	}
	assert.False(t, allowed(t, admin, access{"get", "storage.k8s.io", "csinodes", ""}), "daemonsets.yaml allows csinodes")
	apply(t, cp, "csi.yaml")
	assert.NoError(t, waitAllowed(t, admin, access{"get", "storage.k8s.io", "csinodes", ""}), "manifests/gates/csi.yaml must allow get csinodes")
}

// waitAllowed waits until the authorizer allows a, for at most a minute.
func waitAllowed(t *testing.T, c kubernetes.Interface, a access) error {
	t.Helper()
	return wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return allowed(t, c, a), nil
	})
}

func apply(t *testing.T, cp *controlplane.ControlPlane, gateFile string) {
	t.Helper()
	out, err := cp.Kubectl(t.Context(), nil, "apply", "-f", filepath.Join("..", "..", "..", "manifests", "gates", gateFile))
	require.NoError(t, err, "kubectl apply -f manifests/gates/%s: %s", gateFile, out)
}
