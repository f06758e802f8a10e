package main

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/nodeready/nodeready/e2e/framework/harness"
	"github.com/nodeready/nodeready/e2e/framework/karpenter"
	"github.com/nodeready/nodeready/e2e/framework/kubelet"
)

// watchCluster feeds the tracker from informers on the fleet's Nodes and on the agent Pods
// until ctx ends. It returns once both informers have synced; the returned function stops
// them and waits until their handlers have returned.
func watchCluster(ctx context.Context, client kubernetes.Interface, fleet string, tr *tracker) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	nodes := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = harness.FleetLabel + "=" + fleet }))
	pods := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithNamespace(harness.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = harness.AgentSelector }))
	stop = func() {
		cancel()
		nodes.Shutdown()
		pods.Shutdown()
	}

	onNode := func(obj any) {
		// A Karpenter node gets its startup taint when Karpenter registers it: it joins the
		// demo then, as a node born with the taint.
		if n, ok := obj.(*corev1.Node); ok && registered(n) {
			tr.Node(n.Name, n.Labels[harness.VerifiedLabel] == "true", hasTaint(n, harness.StartupTaint), kept(n), time.Now())
		}
	}
	_, err = nodes.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onNode,
		UpdateFunc: func(_, obj any) { onNode(obj) },
	})
	if err != nil {
		stop()
		return nil, err
	}
	onPod := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok {
			if node := podNode(p); node != "" {
				tr.Pod(node, p.UID, p.Status.Phase == corev1.PodRunning, p.DeletionTimestamp != nil, time.Now())
			}
		}
	}
	_, err = pods.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onPod,
		UpdateFunc: func(_, obj any) { onPod(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				if node := podNode(p); node != "" {
					tr.PodGone(node, p.UID, time.Now())
				}
			}
		},
	})
	if err != nil {
		stop()
		return nil, err
	}

	nodes.Start(ctx.Done())
	pods.Start(ctx.Done())
	for _, synced := range []map[reflect.Type]bool{nodes.WaitForCacheSync(ctx.Done()), pods.WaitForCacheSync(ctx.Done())} {
		for typ, ok := range synced {
			if !ok {
				stop()
				return nil, fmt.Errorf("sync %s informer: %w", typ, ctx.Err())
			}
		}
	}
	return stop, nil
}

// pollKubelet feeds the tracker what the kubelet knows: when each agent process started
// and how it ended.
func pollKubelet(k *kubelet.Kubelet, tr *tracker, now time.Time) {
	for _, p := range k.Pods() {
		tr.Process(p.Node, p.UID, p.Running, now)
		for _, e := range p.Exits {
			tr.Exit(e.Node, e.UID, e.Code, e.Signaled, e.Killed, e.At)
		}
	}
}

// podNode returns the node an agent pod is bound to or, before the scheduler binds it, the
// node the DaemonSet controller made it for (its node affinity on metadata.name).
func podNode(p *corev1.Pod) string {
	if p.Spec.NodeName != "" {
		return p.Spec.NodeName
	}
	if p.Spec.Affinity == nil || p.Spec.Affinity.NodeAffinity == nil {
		return ""
	}
	required := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if required == nil {
		return ""
	}
	for _, term := range required.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			if f.Key == metav1.ObjectNameField && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

// registered reports whether the node is not Karpenter's, or Karpenter has registered it.
func registered(n *corev1.Node) bool {
	_, managed := n.Labels[karpenter.NodePoolLabel]
	return !managed || n.Labels[karpenter.RegisteredLabel] == "true"
}

// kept reports whether the node still has the labels and taints that are not nodeready's.
func kept(n *corev1.Node) bool {
	want := map[string]string{harness.ForeignLabel: harness.ForeignLabelValue}
	maps.Copy(want, demoLabels)
	for k, v := range want {
		if n.Labels[k] != v {
			return false
		}
	}
	for _, t := range harness.ForeignTaints {
		if !hasTaint(n, t) {
			return false
		}
	}
	return true
}

func hasTaint(n *corev1.Node, want corev1.Taint) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&want) && t.Value == want.Value })
}
