package karpenter

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/nodeready/nodeready/e2e/framework/harness"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// Karpenter's resources.
var (
	NodePools       = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodepools"}
	NodeClaims      = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodeclaims"}
	KWOKNodeClasses = schema.GroupVersionResource{Group: "karpenter.kwok.sh", Version: "v1alpha1", Resource: "kwoknodeclasses"}
)

// Karpenter's labels on the nodes it launches.
const (
	NodePoolLabel    = "karpenter.sh/nodepool"
	RegisteredLabel  = "karpenter.sh/registered"
	InitializedLabel = "karpenter.sh/initialized"
)

// InstanceType is the one kwok instance type the NodePools allow: 2 CPUs, so the agent and
// one workload pod fit, and every launch is alike.
const InstanceType = "c-2x-amd64-linux"

// Dynamic returns a dynamic client of the cluster, for Karpenter's resources.
func Dynamic(c *harness.Cluster) (dynamic.Interface, error) {
	return dynamic.NewForConfig(c.ControlPlane().RESTConfig())
}

func createNodeClass(ctx context.Context, c *harness.Cluster) error {
	dyn, err := Dynamic(c)
	if err != nil {
		return err
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "karpenter.kwok.sh/v1alpha1",
		"kind":       "KWOKNodeClass",
		"metadata":   map[string]any{"name": NodeClass},
	}}
	_, err = dyn.Resource(KWOKNodeClasses).Create(ctx, obj, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create KWOKNodeClass %s: %w", NodeClass, err)
	}
	return nil
}

// NodePool returns a NodePool named name whose nodes start with nodeready's startup taint
// (spec.template.spec.startupTaints, as examples/karpenter-nodepool.yaml says) and carry the
// fleet's label, so that fleet adopts them, and harness.ForeignLabel, which the release must
// keep. Karpenter never consolidates or expires them: a test removes what it launched.
func NodePool(name, fleet string) *unstructured.Unstructured {
	taint := wellknown.StartupTaint()
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "karpenter.sh/v1",
		"kind":       "NodePool",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{
					harness.FleetLabel:   fleet,
					harness.ForeignLabel: harness.ForeignLabelValue,
				}},
				"spec": map[string]any{
					"nodeClassRef": map[string]any{"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": NodeClass},
					"requirements": []any{
						map[string]any{"key": corev1.LabelInstanceTypeStable, "operator": "In", "values": []any{InstanceType}},
						map[string]any{"key": "karpenter.sh/capacity-type", "operator": "In", "values": []any{"on-demand"}},
					},
					"startupTaints": []any{map[string]any{"key": taint.Key, "value": taint.Value, "effect": string(taint.Effect)}},
					"expireAfter":   "Never",
				},
			},
			"disruption": map[string]any{"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"},
		},
	}}
}

// ReadinessTaintKey is a startup taint key for nodeready under readiness.k8s.io/, which
// Karpenter (pkg/scheduling KnownEphemeralTaintKeyPrefixes) treats as ephemeral without
// being told: it ignores such a taint on an uninitialized node when it simulates scheduling,
// and counts the NodeClaim Initialized only once the taint is gone.
const ReadinessTaintKey = "readiness.k8s.io/nodeready-unverified"

// NodePoolWithoutStartupTaints is NodePool with no startupTaints: the taint is put on by
// someone else (the creation-time admission policy) and Karpenter is not told about it.
func NodePoolWithoutStartupTaints(name, fleet string) *unstructured.Unstructured {
	p := NodePool(name, fleet)
	unstructured.RemoveNestedField(p.Object, "spec", "template", "spec", "startupTaints")
	return p
}
