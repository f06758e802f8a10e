package agent

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodeready/nodeready/internal/config"
	"github.com/nodeready/nodeready/internal/wellknown"
	"github.com/nodeready/nodeready/nodepatch"
)

const claimName = "default-x"

// ownedNode is heldNode as Karpenter registers it: owned by its NodeClaim.
func ownedNode() *corev1.Node {
	n := heldNode()
	n.OwnerReferences = []metav1.OwnerReference{{APIVersion: "karpenter.sh/v1", Kind: "NodeClaim", Name: claimName, UID: "uid-" + claimName}}
	return n
}

// nodeClaims serves node-a's NodeClaim.
func nodeClaims() *dynamicfake.FakeDynamicClient {
	claim := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
		"metadata": map[string]any{"name": claimName, "uid": "uid-" + claimName},
	}}
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{nodepatch.NodeClaims: "NodeClaimList"}, claim)
}

// deletes counts the deletions the dynamic client was asked for.
func deletes(dyn *dynamicfake.FakeDynamicClient) int {
	n := 0
	for _, a := range dyn.Actions() {
		if a.GetVerb() == "delete" {
			n++
		}
	}
	return n
}

// TestFailOpenReleasesAfterItsTime: with fail-open, a held node whose checks fail is
// released once FAIL_OPEN_AFTER has passed, and its label, condition and Event say it
// failed open: nothing recovered.
func TestFailOpenReleasesAfterItsTime(t *testing.T) {
	c := newCluster(heldNode())
	r := start(t, c.peered(t, newAgent(t, Clients{Kube: c.kube()}, failing, map[string]string{"MAX_RETRIES": "1", "FAILURE_ACTION": config.FailOpen, "FAIL_OPEN_AFTER": "100ms"})))

	waitFor(t, "failed open", func() bool { return isVerified(r.Agent) })
	node := c.node(t)
	held, err := time.ParseDuration(node.Annotations["node-ready/verified-duration"])
	require.NoError(t, err)
	assert.GreaterOrEqual(t, held, 100*time.Millisecond, "released before its time")
	assert.Equal(t, wellknown.FailedOpenValue, node.Labels["node-ready/verified"], "released as failed open, in the release's own write")
	assert.Equal(t, []corev1.Taint{otherTaint}, node.Spec.Taints)
	assert.Equal(t, 2, c.requests("patch", ""), "the failing checks recorded for the fleet, then the release")
	assert.Equal(t, []string{string(wellknown.ChecksFailed), string(wellknown.FailedOpen)}, c.reasons())
	e := c.waitEvent(t, wellknown.FailedOpen)
	assert.Equal(t, corev1.EventTypeWarning, e.Type)
	assert.Contains(t, e.Note, failingNote)
	require.NoError(t, r.stop(t))
	c.emittedOnce(t, wellknown.FailedOpen)
	assert.Empty(t, c.eventsOf(t, wellknown.Verified), "checks still fail: nothing recovered")
}

// TestReplaceNodeOnceAfterFailure: with replace-node, a held node whose checks fail has its
// NodeClaim deleted, once, and its condition says Replacing; then the agent runs no more
// rounds and writes nothing more: the node is going.
func TestReplaceNodeOnceAfterFailure(t *testing.T) {
	c, dyn := newCluster(ownedNode()), nodeClaims()
	r := start(t, c.peered(t, newAgent(t, Clients{Kube: c.kube(), Dynamic: dyn}, failing, map[string]string{"MAX_RETRIES": "2", "FAILURE_ACTION": config.ReplaceNode})))

	waitFor(t, "replaced", func() bool { return deletes(dyn) == 1 })
	waitFor(t, "condition Replacing", func() bool { return c.condition(t).Reason == string(wellknown.Replacing) })
	n, writes := rounds(r.Agent), c.writes()
	// Only a while can show that something does not happen: some twenty rounds of 5 ms.
	assert.Never(t, func() bool { return rounds(r.Agent) != n || c.writes() != writes }, 100*time.Millisecond, 5*time.Millisecond,
		"rounds or writes went on after the node's deletion")
	_, err := dyn.Resource(nodepatch.NodeClaims).Get(t.Context(), claimName, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the NodeClaim is there: %v", err)
	assert.Equal(t, 1, deletes(dyn), "replaced more than once")
	assert.Zero(t, c.requests("delete", ""), "the Node deleted beside its NodeClaim")
	assert.Equal(t, 1, c.requests("patch", ""), "a failing node released (one patch: the failing checks recorded for the fleet)")
	assert.Equal(t, []string{string(wellknown.ChecksFailing), string(wellknown.ChecksFailed), string(wellknown.Replacing)}, c.reasons())
	assert.Equal(t, "Deleted NodeClaim "+claimName+" because checks failed: "+failingNote, c.waitEvent(t, wellknown.ReplacingNode).Note)
}

// TestReplaceNodeNeverOnAbort: a SIGTERM during the checks is no failed round.
func TestReplaceNodeNeverOnAbort(t *testing.T) {
	srv, dns := dnsServer(t)
	srv.Hold()
	c, dyn := newCluster(ownedNode()), nodeClaims()
	r := start(t, newAgent(t, Clients{Kube: c.kube(), Dynamic: dyn}, dns,
		map[string]string{"CHECKS": "dns", "MAX_RETRIES": "1", "FAILURE_ACTION": config.ReplaceNode, "CHECK_TIMEOUT": "1m"}))

	waitFor(t, "the check asked", func() bool { n, _ := srv.Queries(); return n > 0 })
	r.abort(t)
	assert.Zero(t, deletes(dyn))
	assert.Zero(t, c.writes(), "an abort writes")
	assert.Empty(t, c.events(t), "an abort records an Event")
}

// TestReplaceRefusals: a control-plane node, a node whose startup taint is gone and a node
// nodeready verified before are never replaced, and that is said once; a refused deletion
// is tried again each round but reported once per error.
func TestReplaceRefusals(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, c *cluster, a *Agent)
		final bool   // not tried again
		says  string // in the condition, after "not replaced: "
	}{
		{"control-plane node", func(t *testing.T, c *cluster, _ *Agent) {
			c.editNode(t, func(n *corev1.Node) { n.Labels["node-role.kubernetes.io/control-plane"] = "" })
		}, true, "node node-a is labelled node-role.kubernetes.io/control-plane: " + nodepatch.ErrControlPlane.Error()},
		{"startup taint removed by hand", func(_ *testing.T, c *cluster, a *Agent) {
			// Removed between the agent's first look at the node and its deletion, which
			// reads the node once the failure is recorded.
			c.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
				if failures(a) == 1 {
					obj, err := c.Tracker().Get(nodesGVR, "", nodeName)
					if err != nil {
						return true, nil, err
					}
					n := obj.(*corev1.Node).DeepCopy()
					n.Spec.Taints = []corev1.Taint{otherTaint}
					return true, n, c.Tracker().Update(nodesGVR, n, "")
				}
				return false, nil, nil
			})
		}, true, "node node-a has no taint node-ready/unverified=true:NoSchedule: " + nodepatch.ErrNotHeld.Error()},
		{"verified before", func(t *testing.T, c *cluster, _ *Agent) {
			c.editNode(t, func(n *corev1.Node) {
				n.Annotations = map[string]string{"node-ready/verified-at": "2026-01-01T00:00:00Z"}
			})
		}, true, "node node-a was released by nodeready at 2026-01-01T00:00:00Z (annotation node-ready/verified-at): " + nodepatch.ErrVerifiedBefore.Error()},
		{"deletion forbidden", func(t *testing.T, c *cluster, _ *Agent) {
			c.fault("delete", "", forbidden)
		}, false, "delete node node-a: forbidden: check the ClusterRole and the admission policy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(heldNode())
			a := c.peered(t, newAgent(t, Clients{Kube: c.kube()}, failing, map[string]string{"MAX_RETRIES": "1", "FAILURE_ACTION": config.ReplaceNode}))
			tt.setup(t, c, a)
			r := start(t, a)

			e := c.waitEvent(t, wellknown.ReplaceFailed)
			assert.True(t, strings.HasPrefix(e.Note, "Not replacing node: "+tt.says), e.Note)
			waitFor(t, "the condition says why", func() bool {
				return strings.Contains(c.condition(t).Message, failingNote+"; not replaced: "+tt.says)
			})
			reads, deleted := c.requests("get", ""), c.requests("delete", "")
			n := rounds(r.Agent)
			waitFor(t, "rounds go on", func() bool { return rounds(r.Agent) >= n+3 })
			if tt.final {
				// The watch serves every other read: a read is a try at the deletion.
				assert.Equal(t, reads, c.requests("get", ""), "tried again")
				assert.Zero(t, c.requests("delete", ""))
			} else {
				assert.Greater(t, c.requests("delete", ""), deleted, "not tried again")
			}
			require.NoError(t, r.stop(t))
			c.emittedOnce(t, wellknown.ReplaceFailed)
			assert.Equal(t, []string{string(wellknown.ChecksFailed)}, slices.Compact(c.reasons()), "never Replacing: nothing was deleted")
			assert.Contains(t, c.node(t).Spec.Taints, otherTaint)
		})
	}
}

// TestFailureActionsOnlyOnHeldNodes: a node that had no startup taint when the agent
// started (a node that predates the install) is never failed open nor replaced, however its
// checks fail; the failure is still recorded and says why no action follows, and the node
// is labelled once its checks pass.
func TestFailureActionsOnlyOnHeldNodes(t *testing.T) {
	for _, action := range []string{config.FailOpen, config.ReplaceNode} {
		t.Run(action, func(t *testing.T) {
			srv, dns := dnsServer(t)
			srv.SetBroken(true)
			node := heldNode()
			node.Spec.Taints = []corev1.Taint{otherTaint}
			c := newCluster(node)
			r := runNew(t, c, dns, map[string]string{"CHECKS": "dns", "MAX_RETRIES": "1", "FAILURE_ACTION": action, "FAIL_OPEN_AFTER": "1ms"})

			waitFor(t, "failure recorded", func() bool { return failures(r.Agent) == 1 })
			waitFor(t, "rounds go on", func() bool { return rounds(r.Agent) >= 5 })
			assert.Zero(t, c.requests("patch", ""), "released")
			assert.Zero(t, c.requests("delete", ""), "replaced")
			assert.Equal(t, []string{string(wellknown.ChecksFailed)}, c.reasons())
			assert.Contains(t, c.waitEvent(t, wellknown.VerificationFailed).Note, "failure action: none, the node is not held by nodeready")

			srv.SetBroken(false)
			waitFor(t, "labelled once its checks pass", func() bool { return isVerified(r.Agent) })
			assert.Equal(t, "true", c.node(t).Labels["node-ready/verified"])
			require.NoError(t, r.stop(t))
			c.emittedOnce(t, wellknown.VerificationFailed)
		})
	}
}

// TestForbiddenCheckIsAMisconfiguration: a check the API refuses (the endpoints Role in the
// wrong namespace) cannot say anything about the node: it holds the node, is no failed
// check, and brings no failure action by itself; beside it, the node's own failing check
// still does, with the fleet's evidence.
func TestForbiddenCheckIsAMisconfiguration(t *testing.T) {
	srv, dns := dnsServer(t)
	srv.SetBroken(true)
	c := newCluster(heldNode())
	c.PrependReactor("list", "endpointslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}, "", assert.AnError)
	})
	r := start(t, c.peered(t, newAgent(t, Clients{Kube: c.kube()}, dns, map[string]string{"CHECKS": "endpoints,dns", "MAX_RETRIES": "1", "FAILURE_ACTION": config.ReplaceNode})))

	waitFor(t, "failure recorded", func() bool { return failures(r.Agent) == 1 })
	waitFor(t, "the node's own failure replaced it", func() bool { return c.requests("delete", "") == 1 })
	assert.Contains(t, c.waitEvent(t, wellknown.VerificationFailed).Note, "failure action: replace-node")
	assert.Contains(t, c.waitEvent(t, wellknown.ReplacingNode).Note, "because checks failed: dns ok.test.: ")
	require.NoError(t, r.stop(t))
	checkFailed := c.eventsOf(t, wellknown.CheckFailed)
	require.NotEmpty(t, checkFailed)
	for _, e := range checkFailed {
		assert.True(t, strings.HasPrefix(e.Note, "dns ok.test.: "), "a CheckFailed Event for the refused check: %s", e.Note)
	}
}

// TestClusterFaultsNeverReplace: a check that no node could pass (an API the cluster does
// not serve, a DaemonSet the configuration names that does not exist, a program that is not
// in the image) is the cluster's or the configuration's fault. With replace-node it holds
// the node as Misconfigured, says so in the Events, and never deletes anything.
func TestClusterFaultsNeverReplace(t *testing.T) {
	for _, tt := range []struct {
		name string
		env  map[string]string
		says string
	}{
		{"dra on an API server without resource.k8s.io", map[string]string{"CHECKS": "dra", "DRA_DEVICES": "gpu.example.com>=1"}, "serves no resource.k8s.io"},
		{"a named DaemonSet that does not exist", map[string]string{"CHECKS": "daemonsets", "DAEMONSETS": "kube-system/cilium"}, "daemonset kube-system/cilium: not found"},
		{"a program not in the image", map[string]string{"CHECKS": "command", "CHECK_COMMAND": "/nonexistent/warmup.sh"}, "no such file or directory"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(ownedNode())
			dyn := nodeClaims()
			r := prepare(t, newAgent(t, Clients{Kube: c.kube(), Dynamic: dyn}, tt.env, map[string]string{"MAX_RETRIES": "1", "FAILURE_ACTION": config.ReplaceNode}))
			r.start()

			waitFor(t, "failure recorded", func() bool { return failures(r.Agent) == 1 })
			waitFor(t, "rounds go on", func() bool { return rounds(r.Agent) >= 5 })
			require.NoError(t, r.stop(t))
			assert.Zero(t, deletes(dyn), "a NodeClaim deleted for the cluster's fault")
			assert.Zero(t, c.requests("delete", ""), "a Node deleted for the cluster's fault")
			assert.Equal(t, string(wellknown.Misconfigured), c.condition(t).Reason)
			assert.Contains(t, c.condition(t).Message, tt.says)
			assert.Contains(t, c.waitEvent(t, wellknown.VerificationFailed).Note, "failure action: none while the installation is misconfigured")
			assert.Empty(t, c.eventsOf(t, wellknown.CheckFailed), "no check failed on the node")
			assert.Equal(t, 1.0, testutil.ToFloat64(r.metrics.misconfigured), "nodeready_misconfigured, which the alert reads")
		})
	}
}
