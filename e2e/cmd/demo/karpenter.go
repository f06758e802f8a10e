package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nodeready/nodeready/e2e/framework/harness"
	"github.com/nodeready/nodeready/e2e/framework/karpenter"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// karpenterPool is the NodePool of -karpenter; it is the pool every demo node names.
const karpenterPool = "default"

// startKarpenter runs the real Karpenter (kwok provider) with a NodePool whose
// startupTaints hold nodeready's taint and whose nodes carry the fleet's label and the
// other taints and label every demo node has; the fleet's kubelet adopts each node it
// launches. The returned function stops Karpenter.
func startKarpenter(ctx context.Context, out screen, c *harness.Cluster, f *harness.Fleet, tr *tracker) (stop func(), err error) {
	fmt.Fprintf(out, "\nStarting Karpenter %s (kwok provider) with NodePool %q: startupTaints %s ...\n",
		karpenter.Version, karpenterPool, wellknown.StartupTaintString)
	k, err := karpenter.Start(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("%w (make karpenter builds it)", err)
	}
	pool := karpenter.NodePool(karpenterPool, f.Name())
	var taints []any
	for _, t := range harness.ForeignTaints {
		taints = append(taints, map[string]any{"key": t.Key, "value": t.Value, "effect": string(t.Effect)})
	}
	if err := unstructured.SetNestedSlice(pool.Object, taints, "spec", "template", "spec", "taints"); err != nil {
		k.Stop()
		return nil, err
	}
	dyn, err := karpenter.Dynamic(c)
	if err == nil {
		_, err = dyn.Resource(karpenter.NodePools).Create(ctx, pool, metav1.CreateOptions{})
	}
	if err == nil {
		err = f.Adopt(ctx, karpenter.NodePoolLabel, func(n *corev1.Node) harness.NodeOptions {
			tr.Launched(n.Name, time.Now())
			return harness.NodeOptions{Taints: harness.ForeignTaints}
		})
	}
	if err != nil {
		k.Stop()
		return nil, fmt.Errorf("karpenter: %w", err)
	}
	fmt.Fprintf(out, "Karpenter running; its log: %s\n", k.LogPath())
	return k.Stop, nil
}

// launch creates n pending pods, one per node, that only the NodePool's nodes can take:
// Karpenter launches a node for each.
func launch(ctx context.Context, c *harness.Cluster, n int) error {
	d := karpenter.Workload("demo", karpenterPool, int32(n))
	for _, t := range harness.ForeignTaints {
		d.Spec.Template.Spec.Tolerations = append(d.Spec.Template.Spec.Tolerations,
			corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOpEqual, Value: t.Value, Effect: t.Effect})
	}
	_, err := c.Client().AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create the pending pods: %w", err)
	}
	return nil
}
