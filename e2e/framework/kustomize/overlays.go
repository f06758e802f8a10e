package kustomize

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeready/nodeready/e2e/framework/controlplane"
)

// The shipped keys, and what the overlays' settings.yaml change them to.
const (
	NewLabel     = "example.com/verified"
	NewTaint     = "example.com/unverified"
	NewNamespace = "nodeready"
	NewImage     = "registry.example.com/nodeready:v0.1.0"
)

// KubectlPath is the kubectl of the control plane's build (make e2e builds it).
func KubectlPath(t *testing.T) string {
	t.Helper()
	dir, err := controlplane.DefaultBinDir()
	require.NoError(t, err)
	path := filepath.Join(dir, "kubectl")
	_, err = os.Stat(path)
	require.NoError(t, err, "kubectl: run scripts/build-control-plane.sh (make e2e does)")
	return path
}

// PrefixedOverlay writes an overlay of the repository's manifests/ with namePrefix prod-, the
// replace-node component and the namespace component (namespace nodeready), as a user's own
// overlay might, and returns its directory.
func PrefixedOverlay(t *testing.T, repo string) string {
	t.Helper()
	dir := t.TempDir()
	rel := func(p string) string {
		r, err := filepath.Rel(dir, filepath.Join(repo, p))
		require.NoError(t, err)
		return r
	}
	files := map[string]string{
		"kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamePrefix: prod-\n" +
			"resources:\n  - " + rel("manifests") + "\n  - settings.yaml\n  - namespace.yaml\n" +
			"components:\n  - " + rel("manifests/replace-node") + "\n  - " + rel("kustomize/components/namespace") + "\n",
		"settings.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: nodeready-kustomize\n  annotations:\n" +
			"    config.kubernetes.io/local-config: \"true\"\ndata:\n  namespace: " + NewNamespace + "\n",
		"namespace.yaml": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + NewNamespace + "\n  labels:\n    app.kubernetes.io/name: nodeready\n",
	}
	for name, data := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644))
	}
	return dir
}
