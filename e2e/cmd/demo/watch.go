package main

import (
	"context"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeready/nodeready/e2e/framework/harness"
	"github.com/nodeready/nodeready/e2e/framework/history"
	"github.com/nodeready/nodeready/e2e/framework/karpenter"
	"github.com/nodeready/nodeready/e2e/framework/kubelet"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// agentPod is what the tracker needs of one version of an agent pod.
type agentPod struct {
	node              string // podNode
	uid               types.UID
	running, deleting bool
}

// watchCluster feeds the tracker from the fleet's History of its Nodes and from a history of
// the agent Pods, until stop. It returns once the agent Pods are listed; the returned
// function stops the feed and waits until the tracker is fed no more.
func watchCluster(ctx context.Context, client kubernetes.Interface, f *harness.Fleet, tr *tracker) (stop func(), err error) {
	pods, err := history.Record(ctx, history.Pods(client, harness.Namespace, metav1.ListOptions{LabelSelector: harness.AgentSelector}),
		func(p *corev1.Pod) agentPod {
			return agentPod{node: podNode(p), uid: p.UID, running: p.Status.Phase == corev1.PodRunning, deleting: p.DeletionTimestamp != nil}
		})
	if err != nil {
		return nil, err
	}
	unfollowNodes := f.History().Follow(func(name string, e history.Entry[harness.NodeVersion]) {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: e.State.Labels}, Spec: corev1.NodeSpec{Taints: e.State.Taints}}
		// A Karpenter node gets its startup taint when Karpenter registers it: it joins the
		// demo then, as a node born with the taint.
		if !e.Deleted && registered(n) {
			tr.Node(n.Name, n.Labels[wellknown.VerifiedLabel] == "true", hasTaint(n, wellknown.StartupTaint()), kept(n), e.At)
		}
	})
	unfollowPods := pods.Follow(func(_ string, e history.Entry[agentPod]) {
		switch p := e.State; {
		case p.node == "":
		case e.Deleted:
			tr.PodGone(p.node, p.uid, e.At)
		default:
			tr.Pod(p.node, p.uid, p.running, p.deleting, e.At)
		}
	})
	return func() {
		unfollowNodes()
		unfollowPods()
		pods.Stop()
	}, nil
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
