package kubelet

import (
	"context"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// Exit is one end of an agent process.
type Exit struct {
	Node, Namespace, Pod string
	UID                  types.UID
	// Code is the exit code; 128+n when signal n ended the process, as container runtimes
	// report it.
	Code int
	// Signaled: the kubelet had sent SIGTERM (the pod was deleted, or its liveness probe
	// failed) before the process ended. False means the process ended on its own.
	Signaled bool
	// Killed: the process outlived its grace period and got SIGKILL.
	Killed bool
	At     time.Time
}

// PodInfo is what the kubelet knows about one pod it ran.
type PodInfo struct {
	Node, Namespace, Name string
	UID                   types.UID
	// Restarts counts starts after the first, as the container status's restartCount.
	Restarts int
	// Running: an agent process of the pod is alive now.
	Running bool
	// Done: the kubelet is finished with the pod: terminated, deleted from the API, or its
	// node removed.
	Done bool
	// MetricsAddr is host:port where the running process serves METRICS_PORT (/metrics,
	// /healthz, /readyz); empty while no process runs.
	MetricsAddr string
	Exits       []Exit
}

// Exits returns every recorded end of an agent process, oldest first. Processes killed by
// Stop or RemoveNode are not recorded: that is the machine going away, not the pod ending.
func (k *Kubelet) Exits() []Exit {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.exits)
}

// Pods returns every pod the kubelet has seen bound to its nodes, in no particular order.
func (k *Kubelet) Pods() []PodInfo {
	k.mu.Lock()
	list := make([]*pod, 0, len(k.pods))
	for _, p := range k.pods {
		list = append(list, p)
	}
	k.mu.Unlock()
	infos := make([]PodInfo, 0, len(list))
	for _, p := range list {
		infos = append(infos, p.info())
	}
	return infos
}

// Pod returns what the kubelet knows about the pod with the given UID.
func (k *Kubelet) Pod(uid types.UID) (PodInfo, bool) {
	k.mu.Lock()
	p, ok := k.pods[uid]
	k.mu.Unlock()
	if !ok {
		return PodInfo{}, false
	}
	return p.info(), true
}

// Images returns the images of the init containers and containers "pulled" for pods on the
// node, in order, each once. The processes run Options.AgentBinary whatever the image.
func (k *Kubelet) Images(node string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.images[node])
}

// pod is the kubelet's record of one pod: the latest API object and the state of its
// container. A worker goroutine (worker.go) drives the container.
type pod struct {
	node string
	uid  types.UID

	changed chan struct{} // signals the worker that api or removed changed

	mu          sync.Mutex
	api         *corev1.Pod // latest version seen
	removed     bool        // gone from the API
	abandoned   bool        // node removed or kubelet stopped: nothing more to report
	finished    bool        // the container ended for good; status and deletion remain
	deleted     bool        // the kubelet deleted the pod from the API
	startTime   time.Time   // the kubelet took the pod on
	restarts    int
	proc        *process // running process, or nil
	ready       bool
	waiting     *corev1.ContainerStateWaiting
	ends        []corev1.ContainerStateTerminated // every process that ended, oldest first
	containerID string
	exits       []Exit
}

func (p *pod) info() PodInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	info := PodInfo{
		Node: p.node, Namespace: p.api.Namespace, Name: p.api.Name, UID: p.uid,
		Restarts: p.restarts,
		Running:  p.proc != nil,
		Done:     p.abandoned || p.removed || p.deleted,
		Exits:    slices.Clone(p.exits),
	}
	if p.proc != nil {
		info.MetricsAddr = p.proc.metricsAddr
	}
	return info
}

// update stores the latest API object and wakes the worker.
func (p *pod) update(api *corev1.Pod) {
	p.mu.Lock()
	p.api = api
	p.mu.Unlock()
	p.notify()
}

func (p *pod) notify() {
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// shouldStop reports whether the container must end: the pod is being deleted or is gone.
func (p *pod) shouldStop() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.removed || p.api.DeletionTimestamp != nil
}

// latest returns the latest API object; callers must not modify it.
func (p *pod) latest() *corev1.Pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.api
}

// podSeen handles an added or updated pod bound to node n: a new pod gets a worker.
func (k *Kubelet) podSeen(ctx context.Context, n *node, obj any) {
	api, ok := obj.(*corev1.Pod)
	if !ok || ctx.Err() != nil {
		return
	}
	k.mu.Lock()
	p, known := k.pods[api.UID]
	if !known {
		if isTerminal(api) && api.DeletionTimestamp == nil {
			// Ended before this kubelet saw it; nothing to run or report.
			k.mu.Unlock()
			return
		}
		p = &pod{node: n.name, uid: api.UID, api: api, changed: make(chan struct{}, 1), startTime: time.Now()}
		k.pods[api.UID] = p
		k.recordImages(n.name, api)
		n.wg.Go(func() { k.runPod(ctx, p) })
	}
	k.mu.Unlock()
	if known {
		p.update(api)
	}
	k.status.Add(api.UID)
}

// podGone handles a pod deleted from the API, with or without this kubelet's help.
func (k *Kubelet) podGone(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	api, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	k.mu.Lock()
	p := k.pods[api.UID]
	k.mu.Unlock()
	if p == nil {
		return
	}
	p.mu.Lock()
	p.removed = true
	p.mu.Unlock()
	p.notify()
}

// recordImages notes the images a kubelet would pull for the pod. Called with k.mu held.
func (k *Kubelet) recordImages(node string, api *corev1.Pod) {
	for _, list := range [][]corev1.Container{api.Spec.InitContainers, api.Spec.Containers} {
		for _, c := range list {
			if !slices.Contains(k.images[node], c.Image) {
				k.images[node] = append(k.images[node], c.Image)
			}
		}
	}
}

func isTerminal(api *corev1.Pod) bool {
	return api.Status.Phase == corev1.PodSucceeded || api.Status.Phase == corev1.PodFailed
}
