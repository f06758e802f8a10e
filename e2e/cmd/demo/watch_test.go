package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeready/nodeready/e2e/framework/harness"
	"github.com/nodeready/nodeready/internal/wellknown"
)

func TestPodNode(t *testing.T) {
	// What the DaemonSet controller creates: no node name yet, the node in the affinity.
	unbound := &corev1.Pod{Spec: corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: wellknown.VerifiedLabel, Operator: corev1.NodeSelectorOpDoesNotExist}},
			MatchFields:      []corev1.NodeSelectorRequirement{{Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{"demo-3"}}},
		}}},
	}}}}
	bound := unbound.DeepCopy()
	bound.Spec.NodeName = "demo-4"

	assert.Equal(t, "demo-3", podNode(unbound))
	assert.Equal(t, "demo-4", podNode(bound), "the binding wins")
	assert.Empty(t, podNode(&corev1.Pod{}))
}

func TestKept(t *testing.T) {
	node := func(labels map[string]string, taints ...corev1.Taint) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
	}
	all := map[string]string{harness.ForeignLabel: harness.ForeignLabelValue}
	for k, v := range demoLabels {
		all[k] = v
	}
	assert.True(t, kept(node(all, harness.ForeignTaints...)))
	assert.True(t, kept(node(all, append([]corev1.Taint{wellknown.StartupTaint()}, harness.ForeignTaints...)...)), "the startup taint is nodeready's")
	assert.False(t, kept(node(all, harness.ForeignTaints[0])), "a foreign taint lost")
	assert.False(t, kept(node(map[string]string{harness.ForeignLabel: harness.ForeignLabelValue}, harness.ForeignTaints...)), "a label lost")
}
