package admission

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/controlplane"
	"github.com/nodeready/nodeready/internal/wellknown"
)

var (
	// nodeready's second startup taint, under the prefix Karpenter and NRC know.
	readinessTaint = corev1.Taint{Key: "readiness.k8s.io/nodeready-unverified", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	// Another controller's readiness taint (an NRC rule's): never nodeready's to remove.
	foreignReadinessTaint = corev1.Taint{Key: "readiness.k8s.io/network-unavailable", Value: "pending", Effect: corev1.TaintEffectNoSchedule}
)

// TestSeveralStartupTaints: with EXTRA_TAINTS and the policies' extraTaints naming a second
// startup taint, a new node gets both at creation, and the agent removes both in one write:
// no version of the node ever carries one without the other. Another controller's
// readiness.k8s.io/ taint stays through the release and through a re-verification, in
// which the agent puts both of its taints back. (That the own-node policy refuses the agent
// any write to another taint is e2e/suites/security's; here its extraTaints is what lets the
// release through.)
func TestSeveralStartupTaints(t *testing.T) {
	fw := framework.New(t, framework.Options{})
	cp := fw.ControlPlane()
	admin := fw.Client()
	requireMutatingAdmissionPolicyV1(t, admin)
	applyWithExtraTaints(t, cp, filepath.Join("manifests", "04-admission-policy.yaml"), "['readiness.k8s.io/nodeready-unverified:NoSchedule']")
	applyWithExtraTaints(t, cp, filepath.Join("manifests", "node-creation", "startup-taint.yaml"),
		"[{'key': 'readiness.k8s.io/nodeready-unverified', 'value': 'true', 'effect': 'NoSchedule'}]")
	waitPolicy(t, cp, nil, readinessTaint)

	// The DaemonSet tolerates the second startup taint, as the chart's config.extraTaints
	// makes it, and the other controller's taint, listed as a user lists a taint the agent
	// must run beside.
	fw.TolerateKey(readinessTaint.Key)
	fw.TolerateKey(foreignReadinessTaint.Key)
	const name = "two-taints"
	versions := recordNodes(t, admin, name)
	f := fw.NewFleet("taints")
	require.NoError(t, f.AddNode(t.Context(), name, framework.NodeOptions{Untainted: true, Taints: []corev1.Taint{foreignReadinessTaint},
		Env: map[string]string{"EXTRA_TAINTS": "readiness.k8s.io/nodeready-unverified=true:NoSchedule", "REVERIFY_TAINT": "true"}}))
	created := framework.GetNode(t, admin, name)
	assert.Subset(t, created.Spec.Taints, []corev1.Taint{startupTaint, readinessTaint, foreignReadinessTaint}, "at creation")

	require.NoError(t, f.WaitReleased(t.Context(), name))
	n := framework.GetNode(t, admin, name)
	assert.Contains(t, n.Spec.Taints, foreignReadinessTaint, "the other controller's taint stays through the release")
	assert.Zero(t, countStartupTaints(n.Spec.Taints))
	assert.NotContains(t, n.Spec.Taints, readinessTaint)

	// Re-verification (REVERIFY_TAINT=true): the label removed once the first agent is gone.
	require.NoError(t, f.WaitAgentsGone(t.Context(), name))
	_, err := fw.Kubectl("label", "node", name, wellknown.VerifiedLabel+"-")
	require.NoError(t, err)
	require.NoError(t, f.WaitReleased(t.Context(), name))
	assert.Contains(t, framework.GetNode(t, admin, name).Spec.Taints, foreignReadinessTaint, "the other controller's taint stays through the re-verification")

	// Every version: both startup taints or neither, the other readiness taint always; and
	// the taints went both, neither (released), both (put back), neither (released again).
	var steps []string
	for _, v := range versions() {
		taints := v.Spec.Taints
		startup, readiness := hasTaint(taints, startupTaint), hasTaint(taints, readinessTaint)
		assert.Equal(t, startup, readiness, "a version of node %s carries one startup taint without the other: %v", name, taints)
		assert.True(t, hasTaint(taints, foreignReadinessTaint), "a version of node %s lost the other readiness taint: %v", name, taints)
		step := map[bool]string{true: "held", false: "released"}[startup || readiness]
		if len(steps) == 0 || steps[len(steps)-1] != step {
			steps = append(steps, step)
		}
	}
	assert.Equal(t, []string{"held", "released", "held", "released"}, steps, "node %s", name)
	t.Logf("node %s: %d versions seen: %v", name, len(versions()), steps)
}

func hasTaint(taints []corev1.Taint, want corev1.Taint) bool {
	return slices.ContainsFunc(taints, func(t corev1.Taint) bool { return want.MatchTaint(&t) })
}

// applyWithExtraTaints applies a manifest from the repository with its extraTaints
// variable set to expr.
func applyWithExtraTaints(t *testing.T, cp *controlplane.ControlPlane, file, expr string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", file))
	require.NoError(t, err)
	const empty = "- name: extraTaints\n      expression: \"[]\""
	require.Contains(t, string(data), empty, "%s has no empty extraTaints variable", file)
	path := filepath.Join(t.TempDir(), filepath.Base(file))
	require.NoError(t, os.WriteFile(path, []byte(strings.Replace(string(data), empty, `- name: extraTaints
      expression: "`+expr+`"`, 1)), 0o644))
	kubectl(t, cp, "apply", "-f", path)
}
