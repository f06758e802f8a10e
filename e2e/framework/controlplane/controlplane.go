package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodeready/nodeready/e2e/framework/freeport"
	"github.com/nodeready/nodeready/e2e/framework/process"
)

// Options configures a control plane.
type Options struct {
	// BinDir holds etcd, kube-apiserver, kube-controller-manager and kube-scheduler, as built
	// by scripts/build-control-plane.sh. When empty, DefaultBinDir is used.
	BinDir string
	// LogDir receives one <component>.log per component. It is kept after Stop. When empty,
	// the logs go to the control plane's work directory and are removed by Stop.
	LogDir string

	// APIServerAddress is the address kube-apiserver binds and advertises (the default
	// Service's endpoint); 127.0.0.1 when empty. A real node and its pods reach the API server
	// only on an address outside loopback, such as the host side of a veth pair.
	APIServerAddress string

	// ClusterCIDR, when set, turns on kube-controller-manager's node IPAM controller
	// (--allocate-node-cidrs, --cluster-cidr): every Node gets a /24 of it as spec.podCIDR, which
	// a CNI such as flannel needs. Empty: no pod CIDRs, the node IPAM controller off.
	ClusterCIDR string

	// Extra flags appended to each component's command line; a repeated flag overrides the
	// default (for example "--node-monitor-grace-period=20s" for kube-controller-manager).
	APIServerArgs         []string
	ControllerManagerArgs []string
	SchedulerArgs         []string
}

// Startup deadlines: generous for a loaded two-core machine, short enough to fail clearly.
const (
	etcdStartTimeout      = time.Minute
	apiServerStartTimeout = 2 * time.Minute
	controllersTimeout    = 2 * time.Minute
	// stopGrace bounds a graceful stop. kube-apiserver stops listening at once on SIGTERM but
	// then waits up to a minute (its --request-timeout) for open watches; nothing here needs
	// that wait.
	stopGrace = 2 * time.Second
)

var errStopped = errors.New("control plane stopped")

// ControlPlane is a running set of etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler. Its methods are safe for concurrent use.
type ControlPlane struct {
	opts   Options
	binDir string
	// release is the release the binaries must be, when they come from the cache directory of
	// the release Version chooses; empty when Options.BinDir or $NODEREADY_K8S_BIN names them.
	release string
	logDir  string
	workDir string
	pki     *pki

	etcdPort, etcdPeerPort, apiServerPort, kcmPort, schedulerPort int

	kubeconfig string
	restConfig *rest.Config
	client     kubernetes.Interface

	mu        sync.Mutex
	stopped   bool
	etcd      *process.Process
	apiServer *process.Process
	kcm       *process.Process
	scheduler *process.Process
	stopOnce  sync.Once
}

// Start starts a control plane and returns once the API server is ready, the controller
// manager has created the default ServiceAccount and the scheduler reports ready. ctx bounds
// only the startup; the processes run until Stop.
//
// The ports are chosen free and then bound by the components; when another program takes one
// in between (other tests, agents of a simulated kubelet), the whole control plane starts
// again on new ports, up to startAttempts times.
func Start(ctx context.Context, opts Options) (*ControlPlane, error) {
	var err error
	for range startAttempts {
		var cp *ControlPlane
		if cp, err = newControlPlane(opts); err != nil {
			return nil, err
		}
		if err = cp.start(ctx); err == nil {
			return cp, nil
		}
		cp.Stop()
		if ctx.Err() != nil || !strings.Contains(err.Error(), "address already in use") {
			return nil, err
		}
	}
	return nil, err
}

// startAttempts bounds the restarts after a port was taken between choosing and binding it.
const startAttempts = 3

func newControlPlane(opts Options) (*ControlPlane, error) {
	var release string
	if opts.BinDir == "" {
		dir, err := DefaultBinDir()
		if err != nil {
			return nil, err
		}
		opts.BinDir = dir
		if os.Getenv(BinDirEnv) == "" {
			release, _ = Version() // DefaultBinDir has checked it
		}
	}
	if err := checkBinaries(opts.BinDir); err != nil {
		return nil, err
	}
	workDir, err := os.MkdirTemp("", "nodeready-controlplane-")
	if err != nil {
		return nil, fmt.Errorf("create work dir: %w", err)
	}
	cp := &ControlPlane{opts: opts, binDir: opts.BinDir, release: release, logDir: opts.LogDir, workDir: workDir}
	if err := cp.prepare(); err != nil {
		os.RemoveAll(workDir)
		return nil, err
	}
	return cp, nil
}

// prepare chooses ports and writes certificates and kubeconfigs.
func (cp *ControlPlane) prepare() error {
	if cp.logDir == "" {
		cp.logDir = filepath.Join(cp.workDir, "logs")
	}
	if err := os.MkdirAll(cp.logDir, 0o755); err != nil {
		return fmt.Errorf("create log dir: %w", err)
	}
	pkiDir := filepath.Join(cp.workDir, "pki")
	if err := os.Mkdir(pkiDir, 0o700); err != nil {
		return fmt.Errorf("create pki dir: %w", err)
	}
	var err error
	if cp.pki, err = newPKI(pkiDir, net.ParseIP(cp.apiServerHost())); err != nil {
		return err
	}
	ports, err := freeport.Ports(5)
	if err != nil {
		return err
	}
	cp.etcdPort, cp.etcdPeerPort, cp.apiServerPort, cp.kcmPort, cp.schedulerPort = ports[0], ports[1], ports[2], ports[3], ports[4]

	cp.kubeconfig = filepath.Join(cp.workDir, "admin.kubeconfig")
	kubeconfigs := map[string]*keyPair{
		cp.kubeconfig: cp.pki.Admin,
		filepath.Join(cp.workDir, "kube-controller-manager.kubeconfig"): cp.pki.KCM,
		filepath.Join(cp.workDir, "kube-scheduler.kubeconfig"):          cp.pki.Scheduler,
	}
	for path, client := range kubeconfigs {
		if err := writeKubeconfig(path, cp.APIServerURL(), cp.pki.CA, client); err != nil {
			return err
		}
	}

	if cp.restConfig, err = clientcmd.BuildConfigFromFlags("", cp.kubeconfig); err != nil {
		return fmt.Errorf("load admin kubeconfig: %w", err)
	}
	// Tests create many objects quickly; the client-side default of 5 QPS would throttle them.
	cp.restConfig.QPS, cp.restConfig.Burst = 100, 200
	if cp.client, err = kubernetes.NewForConfig(cp.restConfig); err != nil {
		return fmt.Errorf("create client: %w", err)
	}
	return nil
}

func (cp *ControlPlane) start(ctx context.Context) error {
	if err := cp.startEtcd(ctx); err != nil {
		return fmt.Errorf("start etcd: %w", err)
	}
	if err := cp.StartAPIServer(ctx); err != nil {
		return err // already says "start kube-apiserver"
	}
	if err := cp.startControllerManager(); err != nil {
		return fmt.Errorf("start kube-controller-manager: %w", err)
	}
	if err := cp.startScheduler(); err != nil {
		return fmt.Errorf("start kube-scheduler: %w", err)
	}
	if err := cp.waitControllerManager(ctx); err != nil {
		return fmt.Errorf("start kube-controller-manager: %w", err)
	}
	if err := cp.waitScheduler(ctx); err != nil {
		return fmt.Errorf("start kube-scheduler: %w", err)
	}
	return cp.checkRelease()
}

// checkRelease fails when the binaries of the cache directory are not the release they were
// chosen for: a run asked for one release must not pass on another.
func (cp *ControlPlane) checkRelease() error {
	if cp.release == "" {
		return nil
	}
	info, err := cp.client.Discovery().ServerVersion()
	if err != nil {
		return fmt.Errorf("read the API server's version: %w", err)
	}
	if info.GitVersion != cp.release {
		return fmt.Errorf("kube-apiserver in %s is %s, not %s; build it again with make control-plane", cp.binDir, info.GitVersion, cp.release)
	}
	return nil
}

// Stop kills every component and removes the work directory (but not Options.LogDir).
// It is idempotent.
func (cp *ControlPlane) Stop() {
	cp.stopOnce.Do(func() {
		cp.mu.Lock()
		cp.stopped = true
		etcd, apiServer, kcm, scheduler := cp.etcd, cp.apiServer, cp.kcm, cp.scheduler
		cp.mu.Unlock()
		// Clients first: with no watches open, the API server exits at once on SIGTERM.
		process.StopAll(stopGrace, scheduler, kcm)
		process.StopAll(stopGrace, apiServer)
		process.StopAll(stopGrace, etcd)
		os.RemoveAll(cp.workDir)
	})
}

// Kubeconfig returns the path of a kubeconfig for the cluster admin (client certificate in
// the system:masters group). The file is removed by Stop.
func (cp *ControlPlane) Kubeconfig() string { return cp.kubeconfig }

// RESTConfig returns a copy of the admin client configuration.
func (cp *ControlPlane) RESTConfig() *rest.Config { return rest.CopyConfig(cp.restConfig) }

// Client returns an admin client. It survives API server restarts.
func (cp *ControlPlane) Client() kubernetes.Interface { return cp.client }

// APIServerURL returns the API server's address, https://127.0.0.1:PORT unless
// Options.APIServerAddress says otherwise.
func (cp *ControlPlane) APIServerURL() string {
	return "https://" + net.JoinHostPort(cp.apiServerHost(), strconv.Itoa(cp.apiServerPort))
}

func (cp *ControlPlane) apiServerHost() string {
	if cp.opts.APIServerAddress != "" {
		return cp.opts.APIServerAddress
	}
	return "127.0.0.1"
}

// APIServerHostPort returns the API server's host and port, in the form of the
// KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT variables that a pod sees.
func (cp *ControlPlane) APIServerHostPort() (host string, port string) {
	return cp.apiServerHost(), strconv.Itoa(cp.apiServerPort)
}

// CAFile returns the path of the cluster CA certificate, which signs the API server's serving
// certificate: what a pod finds at /var/run/secrets/kubernetes.io/serviceaccount/ca.crt.
func (cp *ControlPlane) CAFile() string { return cp.pki.CA.CertFile }

// LogDir returns the directory holding etcd.log, kube-apiserver.log,
// kube-controller-manager.log and kube-scheduler.log.
func (cp *ControlPlane) LogDir() string { return cp.logDir }
