package kubelet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"

	"github.com/nodeready/nodeready/e2e/framework/controlplane"
)

// Options configures a Kubelet.
type Options struct {
	// AgentBinary is what a container of the agent's image runs (see AgentImage).
	AgentBinary string
	// AgentImage is the repository of the agent's image: a pod with a container of it, any
	// tag or digest, is an agent pod and runs AgentBinary; every other pod is simulated.
	// Empty means DefaultAgentImage.
	AgentImage string
	// APIServerURL and CAFile go into the kubeconfig each process gets.
	APIServerURL string
	CAFile       string
	// APIServerHost and APIServerPort are the kubernetes Service's address, which a kubelet
	// puts into every pod as KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT.
	APIServerHost string
	APIServerPort string
	// LogDir receives kubelet.log and one <namespace>_<pod>_<n>.log per process start.
	LogDir string
	// NodeEnv, when set, returns variables that override the pod's environment on a node:
	// what differs from node to node, such as the address of the node-local DNS cache.
	NodeEnv func(node string) map[string]string
	// Version is the kubelet version its nodes report (status.nodeInfo.kubeletVersion); empty
	// means controlplane.KubernetesVersion. A kubelet newer than its API server breaks the
	// version skew policy, so against an older control plane it is that control plane's.
	Version string
}

// DefaultAgentImage is the repository of the image in manifests/03-daemonset.yaml.
const DefaultAgentImage = "ghcr.io/nodeready/nodeready"

// Intervals of a kubelet's reports, shortened only where a test waits on them.
const (
	nodeStatusInterval = 10 * time.Second
	leaseRenewInterval = 5 * time.Second
	leaseDuration      = 40 * time.Second
	readinessInterval  = 250 * time.Millisecond
	maxRestartBackoff  = 10 * time.Second
)

// Kubelet plays the kubelet of any number of nodes. Its methods are safe for concurrent use.
type Kubelet struct {
	client kubernetes.Interface
	opts   Options
	root   string // per-pod kubeconfigs and tokens
	log    *slog.Logger
	logf   *os.File

	// status holds the UIDs of pods whose status may need a write.
	status workqueue.TypedRateLimitingInterface[types.UID]
	added  chan *node    // nodes registered while running, for Run's loop to start
	done   chan struct{} // closed when Run's loop ends
	wg     sync.WaitGroup

	mu      sync.Mutex
	running bool
	stopped bool
	cancel  context.CancelFunc
	// adopters end the node watches of Adopt.
	adopters []context.CancelFunc
	nodes    map[string]*node
	pods     map[types.UID]*pod
	pulls    map[string][]Pull // node -> first pull of each image, in order
}

// New returns a Kubelet that acts through client. It registers nothing before AddNode and
// runs nothing before Run.
func New(client kubernetes.Interface, opts Options) (*Kubelet, error) {
	switch {
	case opts.AgentBinary == "":
		return nil, errors.New("kubelet: Options.AgentBinary is empty")
	case opts.APIServerURL == "" || opts.CAFile == "":
		return nil, errors.New("kubelet: Options.APIServerURL and CAFile are required for the pods' kubeconfigs")
	case opts.LogDir == "":
		return nil, errors.New("kubelet: Options.LogDir is empty")
	}
	if _, err := os.Stat(opts.AgentBinary); err != nil {
		return nil, fmt.Errorf("kubelet: agent binary: %w", err)
	}
	if opts.Version == "" {
		opts.Version = controlplane.KubernetesVersion
	}
	if err := os.MkdirAll(opts.LogDir, 0o755); err != nil {
		return nil, fmt.Errorf("kubelet: create log dir: %w", err)
	}
	logf, err := os.OpenFile(filepath.Join(opts.LogDir, "kubelet.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("kubelet: open log: %w", err)
	}
	root, err := os.MkdirTemp("", "nodeready-kubelet-")
	if err != nil {
		logf.Close()
		return nil, fmt.Errorf("kubelet: create root dir: %w", err)
	}
	return &Kubelet{
		client: client,
		opts:   opts,
		root:   root,
		log:    slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelDebug})),
		logf:   logf,
		// Status writes retry quickly: while the API server is down they fail, and once it is
		// back the pods' status should catch up within a couple of seconds.
		status: workqueue.NewTypedRateLimitingQueue(
			workqueue.NewTypedItemExponentialFailureRateLimiter[types.UID](100*time.Millisecond, 2*time.Second)),
		added: make(chan *node),
		done:  make(chan struct{}),
		nodes: map[string]*node{},
		pods:  map[types.UID]*pod{},
		pulls: map[string][]Pull{},
	}, nil
}

// Run starts the kubelet: heartbeats and pod handling for every node added before or after.
// It returns at once; everything stops when ctx ends or at Stop.
func (k *Kubelet) Run(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.running || k.stopped {
		return errors.New("kubelet: Run called twice or after Stop")
	}
	ctx, cancel := context.WithCancel(ctx)
	k.running, k.cancel = true, cancel

	k.wg.Go(func() { k.runStatusManager(ctx) })
	for _, n := range k.nodes {
		k.startNode(ctx, n)
	}
	k.wg.Go(func() {
		defer close(k.done)
		for {
			select {
			case n := <-k.added:
				k.startNode(ctx, n)
			case <-ctx.Done():
				return
			}
		}
	})
	return nil
}

// Stop kills every agent process (SIGKILL to its process group) and waits until all of them
// and the kubelet's own loops have ended. Nodes and pods stay in the API, as when a machine
// is switched off. Stop is idempotent.
func (k *Kubelet) Stop() {
	k.mu.Lock()
	if k.stopped {
		k.mu.Unlock()
		return
	}
	k.stopped = true
	if k.cancel != nil {
		k.cancel()
	}
	for _, cancel := range k.adopters {
		cancel()
	}
	k.mu.Unlock()

	k.wg.Wait()
	k.status.ShutDown()
	os.RemoveAll(k.root)
	k.logf.Close()
}
