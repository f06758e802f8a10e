package failure

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/dynamic"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/nodepatch"
)

// nodeClaimCRD is just enough of Karpenter's karpenter.sh/v1 NodeClaim for the agent: a
// cluster-scoped resource with a status subresource, its schema left open.
const nodeClaimCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: nodeclaims.karpenter.sh
spec:
  group: karpenter.sh
  scope: Cluster
  names:
    kind: NodeClaim
    listKind: NodeClaimList
    plural: nodeclaims
    singular: nodeclaim
  versions:
    - name: v1
      served: true
      storage: true
      subresources:
        status: {}
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
`

// installNodeClaims installs the NodeClaim CRD, waits until the API server serves it, and
// returns the client of its NodeClaims.
func installNodeClaims(t *testing.T, fw *framework.Framework) dynamic.NamespaceableResourceInterface {
	t.Helper()
	out, err := fw.KubectlIn(strings.NewReader(nodeClaimCRD), "apply", "-f", "-")
	require.NoError(t, err, out)
	out, err = fw.Kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/nodeclaims.karpenter.sh")
	require.NoError(t, err, out)
	return fw.Dynamic().Resource(nodepatch.NodeClaims)
}
