package kubelet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// NodeOptions describes a node as its provisioner (Karpenter, a node pool) registers it.
type NodeOptions struct {
	// Labels are added to the well-known ones a kubelet sets (hostname, os, arch).
	Labels map[string]string
	// Taints are the node's taints at registration, such as a startup taint.
	Taints []corev1.Taint
}

// NodeIP is the InternalIP of every simulated node, and the IP of every pod on it.
const NodeIP = "127.0.0.1"

// capacity is what every simulated node offers; the agent asks for a fraction of it.
var capacity = corev1.ResourceList{
	corev1.ResourceCPU:              resource.MustParse("4"),
	corev1.ResourceMemory:           resource.MustParse("16Gi"),
	corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	corev1.ResourcePods:             resource.MustParse("110"),
}

// node is one registered node and the loops that keep it healthy.
type node struct {
	name string
	uid  types.UID
	// adopted: someone else created the Node (Adopt); its capacity is its own.
	adopted bool

	mu      sync.Mutex
	cancel  context.CancelFunc // ends the node's loops and pod workers; nil until started
	removed bool
	wg      sync.WaitGroup // the node's loops and pod workers
	// conditions, allocatable and capacity are what the test set (SetCondition,
	// SetAllocatable); every status write reports them.
	conditions            []corev1.NodeCondition
	allocatable, capacity corev1.ResourceList
}

// AddNode registers a Node, Ready, with the given labels and taints, as a provisioner and
// the kubelet would. Once the kubelet runs, it keeps the node's status and Lease fresh and
// runs the pods bound to it.
func (k *Kubelet) AddNode(ctx context.Context, name string, opts NodeOptions) error {
	k.mu.Lock()
	_, exists := k.nodes[name]
	stopped := k.stopped
	k.mu.Unlock()
	switch {
	case exists:
		return fmt.Errorf("register node %s: already added", name)
	case stopped:
		return fmt.Errorf("register node %s: kubelet stopped", name)
	}

	created, err := k.client.CoreV1().Nodes().Create(ctx, newNodeObject(name, opts, k.opts.Version, metav1.Now()), metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("register node %s: %w", name, err)
	}
	k.start(&node{name: name, uid: created.UID})
	k.log.Info("Registered node", "node", name)
	return nil
}

// start records the node and, once the kubelet runs, starts its loops.
func (k *Kubelet) start(n *node) {
	k.mu.Lock()
	k.nodes[n.name] = n
	running := k.running
	k.mu.Unlock()
	if running {
		select {
		case k.added <- n:
		case <-k.done:
		}
	}
}

// RemoveNode ends the node as a terminated machine does: its agent processes are killed, and
// its pods, Lease and Node are deleted.
func (k *Kubelet) RemoveNode(ctx context.Context, name string) error {
	k.mu.Lock()
	n := k.nodes[name]
	delete(k.nodes, name)
	k.mu.Unlock()
	if n == nil {
		return fmt.Errorf("remove node %s: not added", name)
	}
	n.stop()

	selector := fields.OneTermEqualSelector("spec.nodeName", name).String()
	pods, err := k.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: selector})
	if err != nil {
		return fmt.Errorf("remove node %s: list pods: %w", name, err)
	}
	var errs []error
	for _, p := range pods.Items {
		err := k.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete pod %s/%s: %w", p.Namespace, p.Name, err))
		}
	}
	err = k.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("delete lease: %w", err))
	}
	err = k.client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("delete node: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove node %s: %w", name, err)
	}
	k.log.Info("Removed node", "node", name)
	return nil
}

// startNode starts the node's pod informer, status heartbeat and Lease renewal.
func (k *Kubelet) startNode(ctx context.Context, n *node) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.removed || n.cancel != nil {
		return
	}
	ctx, n.cancel = context.WithCancel(ctx)

	// One informer per node with a field selector, as a real kubelet watches only the pods
	// bound to it.
	factory := informers.NewSharedInformerFactoryWithOptions(k.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", n.name).String()
		}))
	informer := factory.Core().V1().Pods().Informer()
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { k.podSeen(ctx, n, obj) },
		UpdateFunc: func(_, obj any) { k.podSeen(ctx, n, obj) },
		DeleteFunc: func(obj any) { k.podGone(obj) },
	})
	if err != nil {
		k.log.Error("Could not watch pods", "node", n.name, "error", err)
	}
	factory.Start(ctx.Done())
	// Shutdown returns after the event handlers have returned, so no pod worker is added
	// to n.wg after this goroutine ends.
	n.wg.Go(func() {
		<-ctx.Done()
		factory.Shutdown()
	})
	n.wg.Go(func() { k.every(ctx, nodeStatusInterval, "Could not update node status", n.name, k.updateNodeStatus) })
	n.wg.Go(func() { k.every(ctx, leaseRenewInterval, "Could not renew lease", n.name, k.renewLease) })
	k.wg.Go(n.wg.Wait)
	k.log.Info("Started node", "node", n.name)
}

// stop ends the node's loops and pod workers and waits for them.
func (n *node) stop() {
	n.mu.Lock()
	n.removed = true
	cancel := n.cancel
	n.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	n.wg.Wait()
}

// every runs fn at once and then at each interval until ctx ends, logging failures: an API
// server that is down for a while must not stop the heartbeats for good.
func (k *Kubelet) every(ctx context.Context, interval time.Duration, failure, node string, fn func(context.Context, string) error) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := fn(ctx, node); err != nil && ctx.Err() == nil {
			k.log.Warn(failure, "node", node, "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// updateNodeStatus refreshes the node's conditions, which the node lifecycle controller and
// the scheduler read, and reports its capacity and allocatable resources, with what the test
// set through SetCondition and SetAllocatable. It writes as the kubelet does
// (k8s.io/component-helpers/node/util.PatchNodeStatus): a strategic merge patch of the status
// from the node it read, with no resourceVersion, so that no other writer of the node (the
// agent, a CNI, the tests' writers) can make it fail with a conflict, as an update did.
func (k *Kubelet) updateNodeStatus(ctx context.Context, name string) error {
	k.mu.Lock()
	n := k.nodes[name]
	k.mu.Unlock()
	old, err := k.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	node := old.DeepCopy()
	var conds []corev1.NodeCondition
	var alloc, capa corev1.ResourceList
	if n != nil {
		conds, alloc, capa = n.overrides()
	}
	node.Status.Conditions = setConditions(node.Status.Conditions, withOverrides(healthyConditions(), conds), metav1.Now())
	if n != nil && n.adopted {
		adoptedStatus(&node.Status, k.opts.Version)
	} else {
		node.Status.Capacity, node.Status.Allocatable = capacity.DeepCopy(), capacity.DeepCopy()
	}
	maps.Copy(node.Status.Allocatable, alloc)
	maps.Copy(node.Status.Capacity, capa)
	return k.patchStatus(ctx, old, node)
}

// patchStatus sends the status of node as a strategic merge patch from old. It is
// PatchNodeStatus with a context, so that a stopped node's heartbeat does not wait on a
// frozen API server; the kubelet simulated never changes a node's addresses, the one field
// PatchNodeStatus has to patch by hand.
func (k *Kubelet) patchStatus(ctx context.Context, old, node *corev1.Node) error {
	from, err := json.Marshal(old)
	if err != nil {
		return err
	}
	diff := node.DeepCopy()
	diff.Spec = old.Spec // only status and metadata
	to, err := json.Marshal(diff)
	if err != nil {
		return err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(from, to, corev1.Node{})
	if err != nil {
		return err
	}
	_, err = k.client.CoreV1().Nodes().Patch(ctx, node.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

// SetCondition makes the node report the condition typ with status from now on, as a node
// agent (a CNI, node-problem-detector) or the kubelet itself would, and writes it at once.
// It also overrides the kubelet's own conditions, such as Ready. The heartbeat keeps it.
func (k *Kubelet) SetCondition(ctx context.Context, node string, typ corev1.NodeConditionType, status corev1.ConditionStatus) error {
	n, err := k.node(node)
	if err != nil {
		return err
	}
	c := corev1.NodeCondition{Type: typ, Status: status, Reason: "SetByTest", Message: fmt.Sprintf("%s set to %s by the test", typ, status)}
	n.mu.Lock()
	if i := slices.IndexFunc(n.conditions, func(o corev1.NodeCondition) bool { return o.Type == typ }); i >= 0 {
		n.conditions[i] = c
	} else {
		n.conditions = append(n.conditions, c)
	}
	n.mu.Unlock()
	if err := k.updateNodeStatus(ctx, node); err != nil {
		return fmt.Errorf("set condition %s of node %s: %w", typ, node, err)
	}
	return nil
}

// SetAllocatable makes the node report qty of the resource name as allocatable from now on,
// as a device plugin does once it has registered its devices, and writes it at once. The
// capacity is the largest amount ever set, so lowering the amount models devices that went
// unhealthy. The heartbeat keeps both.
func (k *Kubelet) SetAllocatable(ctx context.Context, node string, name corev1.ResourceName, qty resource.Quantity) error {
	n, err := k.node(node)
	if err != nil {
		return err
	}
	n.mu.Lock()
	if n.allocatable == nil {
		n.allocatable, n.capacity = corev1.ResourceList{}, corev1.ResourceList{}
	}
	n.allocatable[name] = qty.DeepCopy()
	if c, ok := n.capacity[name]; !ok || c.Cmp(qty) < 0 {
		n.capacity[name] = qty.DeepCopy()
	}
	n.mu.Unlock()
	if err := k.updateNodeStatus(ctx, node); err != nil {
		return fmt.Errorf("set allocatable %s of node %s: %w", name, node, err)
	}
	return nil
}

func (k *Kubelet) node(name string) (*node, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := k.nodes[name]
	if n == nil {
		return nil, fmt.Errorf("node %s: not added", name)
	}
	return n, nil
}

// overrides returns copies of what the test set.
func (n *node) overrides() ([]corev1.NodeCondition, corev1.ResourceList, corev1.ResourceList) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.conditions), n.allocatable.DeepCopy(), n.capacity.DeepCopy()
}

// renewLease keeps the node's Lease in kube-node-lease current: the node lifecycle controller
// takes a fresh Lease as the node's heartbeat.
func (k *Kubelet) renewLease(ctx context.Context, name string) error {
	leases := k.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		now := metav1.NewMicroTime(time.Now())
		lease, err := leases.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			k.mu.Lock()
			n := k.nodes[name]
			k.mu.Unlock()
			if n == nil {
				return nil
			}
			_, err = leases.Create(ctx, newLease(name, n.uid, now), metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		lease.Spec.HolderIdentity = ptr.To(name)
		lease.Spec.LeaseDurationSeconds = ptr.To(int32(leaseDuration / time.Second))
		lease.Spec.RenewTime = &now
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		return err
	})
}

func newLease(node string, nodeUID types.UID, now metav1.MicroTime) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name:      node,
			Namespace: corev1.NamespaceNodeLease,
			// Owned by the Node, so the garbage collector removes it with the node.
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node, UID: nodeUID}},
		},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(node),
			LeaseDurationSeconds: ptr.To(int32(leaseDuration / time.Second)),
			RenewTime:            &now,
		},
	}
}

func newNodeObject(name string, opts NodeOptions, version string, now metav1.Time) *corev1.Node {
	labels := map[string]string{
		corev1.LabelHostname:   name,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: runtime.GOARCH,
	}
	maps.Copy(labels, opts.Labels)
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{Taints: opts.Taints},
		Status: corev1.NodeStatus{
			Capacity:    capacity.DeepCopy(),
			Allocatable: capacity.DeepCopy(),
			Conditions:  refreshConditions(nil, now),
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: NodeIP},
				{Type: corev1.NodeHostName, Address: name},
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			NodeInfo: corev1.NodeSystemInfo{
				KubeletVersion:          version,
				OperatingSystem:         "linux",
				Architecture:            runtime.GOARCH,
				OSImage:                 "nodeready e2e",
				ContainerRuntimeVersion: "simulated://1.0",
			},
		},
	}
}

// refreshConditions returns the conditions with the kubelet's own ones (Ready and the
// pressure conditions) healthy and heartbeat now. A condition keeps its transition time while
// its status stays the same. Conditions of other writers, such as the agent's, stay as they
// are: a kubelet owns only its own.
func refreshConditions(old []corev1.NodeCondition, now metav1.Time) []corev1.NodeCondition {
	return setConditions(old, healthyConditions(), now)
}

// healthyConditions are the kubelet's own conditions of a healthy node.
func healthyConditions() []corev1.NodeCondition {
	return []corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure"},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available"},
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status"},
	}
}

// withOverrides returns conds with each condition of overrides in place of the one of its
// type, or added.
func withOverrides(conds, overrides []corev1.NodeCondition) []corev1.NodeCondition {
	for _, o := range overrides {
		if i := slices.IndexFunc(conds, func(c corev1.NodeCondition) bool { return c.Type == o.Type }); i >= 0 {
			conds[i] = o
		} else {
			conds = append(conds, o)
		}
	}
	return conds
}

// setConditions returns old with each condition of set put in, heartbeat now; a condition
// keeps its transition time while its status stays the same.
func setConditions(old, set []corev1.NodeCondition, now metav1.Time) []corev1.NodeCondition {
	conds := slices.Clone(old)
	for _, c := range set {
		c.LastHeartbeatTime, c.LastTransitionTime = now, now
		i := slices.IndexFunc(conds, func(o corev1.NodeCondition) bool { return o.Type == c.Type })
		if i < 0 {
			conds = append(conds, c)
			continue
		}
		if conds[i].Status == c.Status {
			c.LastTransitionTime = conds[i].LastTransitionTime
		}
		conds[i] = c
	}
	return conds
}
