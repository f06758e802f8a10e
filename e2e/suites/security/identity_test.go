package security

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/controlplane"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// TestAgentDeletesOnlyANodeItHolds: with replace-node installed, the agent's token may
// delete its own node only while nodeready holds it. The policy refuses, whatever the Go
// code decides (the requests here go to the API server directly, past nodepatch's own
// refusals), a node it released before, a control-plane node and a node without the
// startup taint; it lets a held node go.
func TestAgentDeletesOnlyANodeItHolds(t *testing.T) {
	cp := framework.New(t, framework.Options{ControlPlaneOnly: true}).ControlPlane()
	admin := cp.Client()
	applyManifests(t, cp)
	out, err := cp.Kubectl(t.Context(), nil, "apply", "-f", filepath.Join("..", "..", "..", "manifests", "replace-node"))
	require.NoError(t, err, "kubectl apply -f manifests/replace-node/: %s", out)

	cases := []struct {
		name string
		edit func(*corev1.Node)
		ok   bool
	}{
		{"a node nodeready released before", func(n *corev1.Node) {
			n.Annotations[wellknown.ReleasedAtAnnotation(wellknown.VerifiedLabel)] = "2026-11-20T08:00:00Z"
		}, false},
		{"a control-plane node", func(n *corev1.Node) { n.Labels["node-role.kubernetes.io/control-plane"] = "" }, false},
		{"a node labelled master, the old name", func(n *corev1.Node) { n.Labels["node-role.kubernetes.io/master"] = "" }, false},
		{"a node without the startup taint", func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{foreignTaint} }, false},
		{"a held node", func(*corev1.Node) {}, true},
	}
	agents := make([]kubernetes.Interface, len(cases))
	names := make([]string, len(cases))
	for i, tt := range cases {
		names[i] = strings.NewReplacer(" ", "-", ",", "").Replace(tt.name)
		n := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: names[i], Labels: map[string]string{"kubernetes.io/hostname": names[i]}, Annotations: map[string]string{}},
			Spec:       corev1.NodeSpec{Taints: []corev1.Taint{startupTaint, foreignTaint}},
		}
		tt.edit(n)
		_, err := admin.CoreV1().Nodes().Create(t.Context(), n, metav1.CreateOptions{})
		require.NoError(t, err)
		agents[i] = agentClient(t, cp, agentPod(t, admin, names[i]))
	}
	waitForPolicy(t, admin, agents[0])

	for i, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			err := agents[i].CoreV1().Nodes().Delete(t.Context(), names[i], metav1.DeleteOptions{})
			if tt.ok {
				require.NoError(t, err)
				return
			}
			require.Error(t, err, "deleted")
			assert.True(t, apierrors.IsForbidden(err), "want 403, got %v", err)
			assert.Contains(t, err.Error(), "nodeready: deletion of node "+names[i]+" refused")
			framework.GetNode(t, admin, names[i]) // still there
		})
	}
}

// TestPoliciesGuardTheAgentOnly: the policies tell the agent by the permission only its
// ClusterRole grants. Another ServiceAccount's pod-bound token that may write nodes (an
// autoscaler's, or one bound to cluster-admin, which holds every permission) is not taken
// for the agent: its writes to any node go through as RBAC allows them.
func TestPoliciesGuardTheAgentOnly(t *testing.T) {
	cp, admin, nodeA, nodeB, agentA := twoNodes(t)
	waitForPolicy(t, admin, agentA)
	ctx := t.Context()

	for _, tt := range []struct{ name, role string }{
		{"autoscaler", "nodes-writer"},
		{"operator", "cluster-admin"},
	} {
		t.Run(tt.name+" bound to "+tt.role, func(t *testing.T) {
			_, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: tt.name}}, metav1.CreateOptions{})
			require.NoError(t, err)
			if tt.role == "nodes-writer" {
				_, err = admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: tt.role},
					Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "patch"}}}}, metav1.CreateOptions{})
				require.NoError(t, err)
			}
			_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: tt.name},
				RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: tt.role},
				Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: tt.name, Namespace: "default"}}}, metav1.CreateOptions{})
			require.NoError(t, err)
			pod, err := admin.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: tt.name + "-"},
				Spec: corev1.PodSpec{ServiceAccountName: tt.name, NodeName: nodeA, Containers: []corev1.Container{{Name: "c", Image: "c"}}}}, metav1.CreateOptions{})
			require.NoError(t, err)
			other := controlplane.ServiceAccountClientForTest(t, cp, "default", tt.name, pod.Name, pod.UID)

			// RBAC takes a moment to see a new binding: wait for the write to be allowed.
			patch := []byte(`{"metadata":{"labels":{"example.com/` + tt.name + `":"x"}}}`)
			err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				_, err := other.CoreV1().Nodes().Patch(ctx, nodeB, types.MergePatchType, patch, metav1.PatchOptions{})
				return err == nil, nil
			})
			require.NoError(t, err, "%s could not label node-b, a node its pod does not run on", tt.name)
			assert.Equal(t, "x", framework.GetNode(t, admin, nodeB).Labels["example.com/"+tt.name])
		})
	}

	// The agent itself is still held to its own node.
	_, err := agentA.CoreV1().Nodes().Patch(ctx, nodeB, types.MergePatchType, []byte(`{"metadata":{"labels":{"example.com/agent":"x"}}}`), metav1.PatchOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "may change only its own node")
}
