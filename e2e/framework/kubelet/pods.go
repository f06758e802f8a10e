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
	// Simulated: not an agent pod. Its containers are simulated, not run (see the package
	// documentation); Running then means they count as running.
	Simulated bool
	// Started is when the pod's main container first started (the agent process, or the
	// simulated containers); zero before that.
	Started time.Time
	// Inits lists every run of an init container, in order, ended ones only.
	Inits []InitRun
}

// InitRun is one run of an init container to its end.
type InitRun struct {
	Container, Image string
	// Code is the exit code, 128+n after signal n; -1 for a container that could not start.
	Code              int
	Started, Finished time.Time
	// Simulated: not run, taken as succeeded (an init container of a simulated pod).
	Simulated bool
}

// Pull is the first pull of an image on a node: the kubelet pulls an image just before it
// starts the first container of it, once per node (imagePullPolicy IfNotPresent).
type Pull struct {
	Image     string
	Node      string
	Namespace string
	Pod       string
	UID       types.UID
	Container string
	Init      bool // the container is an init container
	At        time.Time
}

// Pods returns every agent pod the kubelet has seen bound to its nodes, in no particular
// order: the pods it runs the agent binary for. Simulated pods are left out: see Simulated.
func (k *Kubelet) Pods() []PodInfo { return k.podInfos(false) }

// Simulated returns every simulated pod (not an agent pod) the kubelet has seen bound to its
// nodes, in no particular order.
func (k *Kubelet) Simulated() []PodInfo { return k.podInfos(true) }

func (k *Kubelet) podInfos(simulated bool) []PodInfo {
	k.mu.Lock()
	list := make([]*pod, 0, len(k.pods))
	for _, p := range k.pods {
		if p.simulated == simulated {
			list = append(list, p)
		}
	}
	k.mu.Unlock()
	infos := make([]PodInfo, 0, len(list))
	for _, p := range list {
		infos = append(infos, p.info())
	}
	return infos
}

// Pod returns what the kubelet knows about the pod with the given UID, agent or simulated.
func (k *Kubelet) Pod(uid types.UID) (PodInfo, bool) {
	k.mu.Lock()
	p, ok := k.pods[uid]
	k.mu.Unlock()
	if !ok {
		return PodInfo{}, false
	}
	return p.info(), true
}

// Images returns the images "pulled" on the node, in the order of their first pull, each
// once: init containers' images before the images of the containers they precede. Pulling is
// recorded only; what runs is Options.AgentBinary or nothing (see the package documentation).
func (k *Kubelet) Images(node string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	images := make([]string, 0, len(k.pulls[node]))
	for _, p := range k.pulls[node] {
		images = append(images, p.Image)
	}
	return images
}

// Pulls returns the first pull of every image on the node, oldest first.
func (k *Kubelet) Pulls(node string) []Pull {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.pulls[node])
}

// pull records the pull of c's image for a container start, unless the node has the image.
func (k *Kubelet) pull(p *pod, c *corev1.Container, init bool) {
	api := p.latest()
	k.mu.Lock()
	defer k.mu.Unlock()
	if slices.ContainsFunc(k.pulls[p.node], func(pl Pull) bool { return pl.Image == c.Image }) {
		return
	}
	k.pulls[p.node] = append(k.pulls[p.node], Pull{
		Image: c.Image, Node: p.node, Namespace: api.Namespace, Pod: api.Name, UID: p.uid,
		Container: c.Name, Init: init, At: time.Now(),
	})
}

// pod is the kubelet's record of one pod: the latest API object and the state of its
// container. A worker goroutine (worker.go) drives the container.
type pod struct {
	node      string
	uid       types.UID
	simulated bool // not an agent pod: its containers are simulated

	changed chan struct{} // signals the worker that api or removed changed

	mu          sync.Mutex
	api         *corev1.Pod // latest version seen
	removed     bool        // gone from the API
	abandoned   bool        // node removed or kubelet stopped: nothing more to report
	finished    bool        // the container ended for good; status and deletion remain
	completed   bool        // ran to completion (restartPolicy Never or OnFailure); kept until deleted
	deleted     bool        // the kubelet deleted the pod from the API
	startTime   time.Time   // the kubelet took the pod on
	restarts    int
	proc        *process // running process, or nil
	ready       bool
	waiting     *corev1.ContainerStateWaiting
	ends        []corev1.ContainerStateTerminated // every process that ended, oldest first
	containerID string
	exits       []Exit
	// firstStart is when the main container first started; simStarted is when the simulated
	// containers started, zero while they do not run.
	firstStart, simStarted time.Time
	// initStatuses are the init containers' statuses as the kubelet reports them, one per
	// init container of the spec; inits lists their ended runs.
	initStatuses []corev1.ContainerStatus
	inits        []InitRun
}

func (p *pod) info() PodInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	info := PodInfo{
		Node: p.node, Namespace: p.api.Namespace, Name: p.api.Name, UID: p.uid,
		Restarts:  p.restarts,
		Running:   p.proc != nil || !p.simStarted.IsZero(),
		Done:      p.abandoned || p.removed || p.deleted,
		Exits:     slices.Clone(p.exits),
		Simulated: p.simulated,
		Started:   p.firstStart,
		Inits:     slices.Clone(p.inits),
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
		p = &pod{node: n.name, uid: api.UID, api: api, changed: make(chan struct{}, 1), startTime: time.Now(),
			simulated: !k.isAgentPod(api), initStatuses: initialInitStatuses(api)}
		k.pods[api.UID] = p
		if p.simulated {
			n.wg.Go(func() { k.runSimulatedPod(ctx, p) })
		} else {
			n.wg.Go(func() { k.runPod(ctx, p) })
		}
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

func isTerminal(api *corev1.Pod) bool {
	return api.Status.Phase == corev1.PodSucceeded || api.Status.Phase == corev1.PodFailed
}
