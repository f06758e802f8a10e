package admission

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// TestOldestRelease: what Kubernetes 1.32 refuses or lacks, on a control plane of that
// release with manifests/ installed, whatever release the run chose for the other tests.
// Everything else runs there as on the newer releases, in the same tests (make e2e-versions).
func TestOldestRelease(t *testing.T) {
	fw := framework.New(t, framework.Options{Kubernetes: framework.OldestKubernetes})

	// 1.32 has MutatingAdmissionPolicy only as v1alpha1, off by default: kubectl refuses
	// the taint-at-creation and the label-to-taint policies for their kind, and stores nothing.
	fw.Run("kubectl refuses the creation-time taint and label-to-taint policies", func(t *testing.T, fw *framework.Framework) {
		labelToTaint := fw.Manifest("label-to-taint")
		out, err := fw.Kubectl("apply", "--dry-run=server", "-f", labelToTaint)
		require.Error(t, err, "kubectl apply of %s: %s", labelToTaint, out)
		assert.Contains(t, out, `no matches for kind "MutatingAdmissionPolicy" in version "admissionregistration.k8s.io/v1"`)

		file := fw.Manifest("node-creation", "startup-taint.yaml")
		out, err = fw.Kubectl("apply", "-f", file)
		require.Error(t, err, "kubectl apply of %s: %s", file, out)
		assert.Contains(t, out, `no matches for kind "MutatingAdmissionPolicy" in version "admissionregistration.k8s.io/v1"`)
	})

	// DRA is off by default on 1.32, so no resource.k8s.io version is served: a fault of the
	// cluster, not of the node. A node with the dra gate is held as misconfigured (no failure
	// action), and its condition says why in one message.
	fw.Run("the dra gate holds the node as misconfigured: no resource.k8s.io version is served", func(t *testing.T, fw *framework.Framework) {
		_, node := fw.NewDRANode("dra", framework.DRADriver+">=1")
		cond := fw.WaitCondition(node, string(wellknown.Misconfigured))
		assert.Contains(t, cond.Message, "the API server serves no resource.k8s.io version nodeready reads (v1, v1beta1)")
		assert.True(t, framework.IsTainted(fw.Node(node)), "held")
	})
}
