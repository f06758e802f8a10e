package agent

import (
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodeready/nodeready/internal/wellknown"
)

// TestReverifyTaint: on a node nodeready verified before whose label was removed,
// REVERIFY_TAINT=true puts the startup taint back while the checks run again, and says so;
// without it the node is only labelled again.
func TestReverifyTaint(t *testing.T) {
	for _, on := range []bool{false, true} {
		t.Run("REVERIFY_TAINT="+strconv.FormatBool(on), func(t *testing.T) {
			node := heldNode()
			node.Spec.Taints = []corev1.Taint{otherTaint}
			node.Annotations = map[string]string{"node-ready/verified-at": "2026-01-01T00:00:00Z"}
			c := newCluster(node)
			r := runNew(t, c, passing, map[string]string{"REVERIFY_TAINT": strconv.FormatBool(on)})

			waitFor(t, "verified", func() bool { return isVerified(r.Agent) })
			require.NoError(t, r.stop(t))
			assert.Equal(t, []corev1.Taint{otherTaint}, c.node(t).Spec.Taints)
			assert.Equal(t, "true", c.node(t).Labels["node-ready/verified"])
			if !on {
				assert.Equal(t, 1, c.requests("patch", ""), "the label only")
				assert.Equal(t, []string{string(wellknown.Verified)}, c.reasons())
				assert.Equal(t, []string{"Verified"}, c.eventReasons(t))
				return
			}
			first := c.Actions()[slices.IndexFunc(c.Actions(), func(a k8stesting.Action) bool { return a.Matches("patch", "nodes") })]
			assert.Contains(t, string(first.(k8stesting.PatchAction).GetPatch()), `"op":"add","path":"/spec/taints/-","value":{"key":"node-ready/unverified"`,
				"the first write puts the taint back")
			assert.Equal(t, []string{string(wellknown.Verifying), string(wellknown.Verified)}, c.reasons())
			assert.ElementsMatch(t, []string{"Reverifying", "Verified"}, c.eventReasons(t))
			assert.Contains(t, c.eventsOf(t, wellknown.Reverifying)[0].Note, "Put the startup taint node-ready/unverified=true:NoSchedule back")
		})
	}
}
