package kubelet

import (
	"context"
	"errors"
	"fmt"
	"runtime"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// Adopt makes the kubelet the kubelet of every Node matching the label selector that it did
// not register itself, from now until ctx ends or Stop: Karpenter's kwok provider, for one,
// creates Node objects and no kubelet. An adopted node is kept Ready with a Lease, reports
// the capacity it was created with, and runs its pods like any other. onAdopt, when not nil,
// is called with the Node before the kubelet starts it, so the caller can prepare what the
// node's agents need (NodeEnv); its error is logged. The selector must not match nodes that AddNode registers.
// When the Node is deleted, the kubelet ends the node as a
// terminated machine: its agent processes are killed and the pods still bound to it deleted.
func (k *Kubelet) Adopt(ctx context.Context, selector string, onAdopt func(*corev1.Node) error) error {
	k.mu.Lock()
	stopped := k.stopped
	k.mu.Unlock()
	if stopped {
		return errors.New("kubelet: Adopt after Stop")
	}
	factory := informers.NewSharedInformerFactoryWithOptions(k.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	informer := factory.Core().V1().Nodes().Informer()
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := obj.(*corev1.Node); ok {
				k.adopt(n, onAdopt)
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if n, ok := obj.(*corev1.Node); ok {
				// The informer's goroutine is in k.wg until Stop's Shutdown returns, so
				// this Go never races Stop's Wait.
				k.wg.Go(func() { k.forget(context.WithoutCancel(ctx), n) })
			}
		},
	})
	if err != nil {
		return fmt.Errorf("kubelet: watch nodes %q: %w", selector, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	k.mu.Lock()
	k.adopters = append(k.adopters, cancel)
	k.mu.Unlock()
	factory.Start(ctx.Done())
	k.wg.Go(func() {
		<-ctx.Done()
		factory.Shutdown()
	})
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return fmt.Errorf("kubelet: watch nodes %q: %w", selector, context.Cause(ctx))
	}
	return nil
}

// adopt starts the kubelet of a Node someone else created, unless the kubelet has it.
func (k *Kubelet) adopt(obj *corev1.Node, onAdopt func(*corev1.Node) error) {
	k.mu.Lock()
	_, known := k.nodes[obj.Name]
	k.mu.Unlock()
	if known || obj.DeletionTimestamp != nil {
		return
	}
	if onAdopt != nil {
		if err := onAdopt(obj); err != nil {
			k.log.Error("Could not prepare an adopted node, its agents may fail", "node", obj.Name, "error", err)
		}
	}
	k.start(&node{name: obj.Name, uid: obj.UID, adopted: true})
	k.log.Info("Adopted node", "node", obj.Name, "uid", obj.UID)
}

// forget ends an adopted node whose Node was deleted: its processes are killed and the pods
// left bound to it deleted, as the pod garbage collector would after a while.
func (k *Kubelet) forget(ctx context.Context, obj *corev1.Node) {
	k.mu.Lock()
	n := k.nodes[obj.Name]
	if n == nil || !n.adopted || n.uid != obj.UID {
		k.mu.Unlock()
		return
	}
	delete(k.nodes, obj.Name)
	k.mu.Unlock()
	n.stop()

	selector := fields.OneTermEqualSelector("spec.nodeName", obj.Name).String()
	pods, err := k.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: selector})
	if err != nil {
		k.log.Warn("Could not list the pods of a deleted node", "node", obj.Name, "error", err)
		return
	}
	for _, p := range pods.Items {
		err := k.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		if err != nil && !apierrors.IsNotFound(err) {
			k.log.Warn("Could not delete a pod of a deleted node", "node", obj.Name, "pod", p.Namespace+"/"+p.Name, "error", err)
		}
	}
	k.log.Info("Node deleted, its machine is gone", "node", obj.Name)
}

// Has reports whether the kubelet runs the node: registered with AddNode, or adopted and not
// deleted since.
func (k *Kubelet) Has(name string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.nodes[name] != nil
}

// adoptedStatus fills in what a kubelet reports and a provisioner's Node object lacks: the
// node's addresses and system info. The capacity stays the provisioner's.
func adoptedStatus(s *corev1.NodeStatus, version string) {
	if s.Capacity == nil {
		s.Capacity = corev1.ResourceList{}
	}
	if s.Allocatable == nil {
		s.Allocatable = corev1.ResourceList{}
	}
	if len(s.Addresses) == 0 {
		s.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: NodeIP}}
	}
	if s.NodeInfo.KubeletVersion == "" {
		s.NodeInfo = corev1.NodeSystemInfo{
			KubeletVersion:          version,
			OperatingSystem:         "linux",
			Architecture:            runtime.GOARCH,
			OSImage:                 "nodeready e2e",
			ContainerRuntimeVersion: "simulated://1.0",
		}
	}
	s.DaemonEndpoints.KubeletEndpoint.Port = 10250
	s.Phase = corev1.NodeRunning
}
