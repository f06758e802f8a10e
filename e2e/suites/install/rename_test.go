package install

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeready/nodeready/e2e/framework"
)

// TestOverlaysThatMoveTheAgentKeepItGuarded: the admission policies guard whoever holds
// the agent's ClusterRole, so a kustomize overlay that renames the ServiceAccount
// (namePrefix), moves it with kustomize's own `namespace:` field, or relabels every object,
// selectors included, installs an agent that still cannot write another node, while it
// may write its own.
func TestOverlaysThatMoveTheAgentKeepItGuarded(t *testing.T) {
	fw := framework.New(t, framework.Options{ControlPlaneOnly: true})
	repo, cp := fw.RepoRoot(), fw.ControlPlane()
	_, err := cp.Client().CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "moved-0"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	for _, tt := range []struct {
		name, kustomization, serviceAccount string
	}{
		{"namePrefix", "namePrefix: team-\n", "system:serviceaccount:kube-system:team-nodeready"},
		{"namespace", "namespace: nr-other\n", "system:serviceaccount:nr-other:nodeready"},
		{"labels", "labels:\n  - pairs:\n      app.kubernetes.io/name: node-verifier\n      team: infra\n    includeSelectors: true\n",
			"system:serviceaccount:kube-system:nodeready"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			base, err := filepath.Rel(dir, filepath.Join(repo, "manifests"))
			require.NoError(t, err)
			resources := "resources:\n  - " + base + "\n"
			if strings.HasPrefix(tt.kustomization, "namespace:") {
				resources += "  - namespace.yaml\n"
				require.NoError(t, os.WriteFile(filepath.Join(dir, "namespace.yaml"),
					[]byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: nr-other\n"), 0o644))
			}
			require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"),
				[]byte("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"+resources+tt.kustomization), 0o644))
			kubectl(t, cp, "apply", "-k", dir)
			t.Cleanup(func() { _, _ = cp.Kubectl(context.WithoutCancel(t.Context()), nil, "delete", "-k", dir, "--wait") })

			as := []string{"--as", tt.serviceAccount, "--as-group", "system:serviceaccounts", "--as-group", "system:authenticated"}
			var last string
			err = framework.Poll(t, func(ctx context.Context) (bool, error) {
				out, err := cp.Kubectl(ctx, nil, append(as, "--as-user-extra", "authentication.kubernetes.io/node-name=another-node",
					"label", "node", "moved-0", "--dry-run=server", "example.com/x=y")...)
				last = out
				return err != nil && strings.Contains(out, "nodeready: write to node moved-0 refused: the agent on node another-node may change only its own node"), nil
			})
			require.NoError(t, err, "the own-node policy never refused the moved agent; last answer %s", last)
			out, err := cp.Kubectl(t.Context(), nil, append(as, "--as-user-extra", "authentication.kubernetes.io/node-name=moved-0",
				"label", "node", "moved-0", "--dry-run=server", "node-ready/verified=true")...)
			require.NoError(t, err, "the agent's own label on its own node: %s", out)
		})
	}
}
