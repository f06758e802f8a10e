package harness

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/nodeready/nodeready/e2e/framework/controlplane"
)

// AgentBinaryEnv names the agent binary the simulated kubelets run; make e2e sets it.
const AgentBinaryEnv = "NODEREADY_BIN"

// What manifests/ installs.
const (
	// Namespace holds the DaemonSet, its ConfigMap and the agent pods.
	Namespace     = "kube-system"
	DaemonSetName = "nodeready"
	ConfigMapName = "nodeready-config"
	// AgentSelector selects the agent pods.
	AgentSelector = "app.kubernetes.io/name=nodeready"
	// AgentImage is the image the DaemonSet names; the kubelets run the agent binary instead.
	AgentImage = "ghcr.io/nodeready/nodeready:v0.1.0"
)

const (
	// BackendService, in the default namespace, stands in for default/kubernetes in the
	// endpoints check. kube-apiserver on loopback cannot publish its own address for
	// default/kubernetes (Endpoints and EndpointSlice validation rejects 127.0.0.0/8), so
	// that Service has no endpoints here. This one has a ready endpoint at a
	// documentation-range address; nothing listens there, so the check runs with
	// ENDPOINTS_CONNECT=false and proves the agent's service discovery (RBAC, list,
	// readiness), not the pod network.
	BackendService = "nodeready-e2e-backend"
	backendIP      = "192.0.2.10" // TEST-NET-1, never routed

	// DNSName is the name every node's DNS server answers and the dns check resolves.
	DNSName = "kubernetes.default.svc.cluster.local"
)

// Options configures Start. The zero value is a working setup.
type Options struct {
	// AgentBinary is the nodeready binary the kubelets run for every agent pod. When empty:
	// $NODEREADY_BIN, else <repo>/bin/nodeready (make build).
	AgentBinary string
	// LogDir receives the control plane's logs (controlplane/, unless ControlPlane.LogDir
	// says otherwise) and each fleet's kubelet and agent logs (<fleet>/). It is kept. When
	// empty, Start makes a temporary directory and Stop removes it.
	LogDir string
	// Config holds nodeready-config settings applied on top of the loopback ones at Start
	// and by every ApplyConfig; see ApplyConfig.
	Config map[string]string
	// ControlPlane configures the control plane. Its BinDir also locates kubectl.
	ControlPlane controlplane.Options
	// Logf, when set, receives progress messages such as kubectl's output.
	Logf func(format string, args ...any)
	// NoManifests leaves nodeready out: Start creates BackendService but applies neither
	// manifests/ nor the configuration, for a test that installs nodeready another way (the
	// Helm chart) with LoopbackConfig's settings. ApplyConfig is not for such a cluster.
	NoManifests bool
}

// Cluster is a running control plane with nodeready installed. Its methods are safe for
// concurrent use.
type Cluster struct {
	cp        *controlplane.ControlPlane
	repo      string
	agent     string
	logDir    string
	ownLogDir bool   // made by Start, removed by Stop
	version   string // the API server's gitVersion
	config    map[string]string
	logf      func(format string, args ...any)
	// keepLogs: set by StartForTest when every log is to be kept, also after a passing test.
	keepLogs bool

	mu       sync.Mutex
	fleets   map[string]*Fleet
	stopOnce sync.Once
}

// Start starts a control plane, creates the endpoints backend (BackendService), installs
// nodeready with `kubectl apply -f manifests/` and applies the loopback configuration (see
// ApplyConfig). No node exists yet, so no agent has run with the shipped defaults. ctx
// bounds only the startup; the cluster runs until Stop.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	repo, err := FindRepoRoot()
	if err != nil {
		return nil, err
	}
	agent := opts.AgentBinary
	if agent == "" {
		agent = os.Getenv(AgentBinaryEnv)
	}
	if agent == "" {
		agent = filepath.Join(repo, "bin", "nodeready")
	}
	if _, err := os.Stat(agent); err != nil {
		return nil, fmt.Errorf("agent binary: %w; run make build (or set %s)", err, AgentBinaryEnv)
	}
	binDir := opts.ControlPlane.BinDir
	if binDir == "" {
		if binDir, err = controlplane.DefaultBinDir(); err != nil {
			return nil, err
		}
	}
	// Checked here, as Kubectl runs it (controlplane.ControlPlane.Kubectl), to fail early.
	if _, err := os.Stat(filepath.Join(binDir, "kubectl")); err != nil {
		return nil, fmt.Errorf("kubectl: %w; run make control-plane", err)
	}

	c := &Cluster{
		repo:   repo,
		agent:  agent,
		logDir: opts.LogDir,
		config: opts.Config,
		logf:   opts.Logf,
		fleets: map[string]*Fleet{},
	}
	if c.logf == nil {
		c.logf = func(string, ...any) {}
	}
	if c.logDir == "" {
		if c.logDir, err = os.MkdirTemp("", "nodeready-e2e-"); err != nil {
			return nil, fmt.Errorf("create log dir: %w", err)
		}
		c.ownLogDir = true
	}
	cpOpts := opts.ControlPlane
	if cpOpts.LogDir == "" {
		cpOpts.LogDir = filepath.Join(c.logDir, "controlplane")
	}
	if c.cp, err = controlplane.Start(ctx, cpOpts); err != nil {
		c.Stop()
		return nil, fmt.Errorf("start control plane (logs in %s): %w", cpOpts.LogDir, err)
	}
	info, err := c.Client().Discovery().ServerVersion()
	if err != nil {
		c.Stop()
		return nil, fmt.Errorf("read the API server's version: %w", err)
	}
	c.version = info.GitVersion
	if err := c.install(ctx, !opts.NoManifests); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) install(ctx context.Context, manifests bool) error {
	if err := c.createBackendService(ctx); err != nil {
		return err
	}
	if !manifests {
		return nil
	}
	out, err := c.Kubectl(ctx, "apply", "-f", filepath.Join(c.repo, "manifests"))
	if err != nil {
		return err
	}
	c.logf("kubectl apply -f manifests/:\n%s", out)
	return c.ApplyConfig(ctx, nil)
}

// Stop stops the fleets still running (their agent processes are killed; the nodes go away
// with the control plane), then the control plane, and removes the log directory if Start
// made it. It is idempotent.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		c.mu.Lock()
		fleets := slices.Collect(maps.Values(c.fleets))
		c.mu.Unlock()
		for _, f := range fleets {
			if f != nil {
				f.shutdown(false)
			}
		}
		if c.cp != nil {
			c.cp.Stop()
		}
		if c.ownLogDir {
			os.RemoveAll(c.logDir)
		}
	})
}

// Client returns an admin client. It survives API server restarts.
func (c *Cluster) Client() kubernetes.Interface { return c.cp.Client() }

// ControlPlane returns the control plane, for its kubeconfig or to stop and start the API
// server.
func (c *Cluster) ControlPlane() *controlplane.ControlPlane { return c.cp }

// KubernetesVersion returns the API server's version (its gitVersion, such as v1.36.3), which
// the fleets' kubelets report as theirs.
func (c *Cluster) KubernetesVersion() string { return c.version }

// RepoRoot returns the repository whose manifests/ were installed.
func (c *Cluster) RepoRoot() string { return c.repo }

// LogDir returns the directory that holds the control plane's and the fleets' logs.
func (c *Cluster) LogDir() string { return c.logDir }

// Kubectl runs kubectl as the cluster admin and returns its combined output. The error holds
// the output too.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	return c.cp.Kubectl(ctx, nil, args...)
}

// LoopbackConfig is what ApplyConfig changes in the shipped configuration so that every
// check passes on loopback, and a failing one shows within seconds.
func LoopbackConfig() map[string]string {
	return map[string]string{
		// Each node's DNS_NAMESERVER is its own node-local server (Fleet.AddNode); the name
		// is answered by those servers.
		"DNS_TEST_DOMAINS": DNSName,
		// TCP_TARGETS stays empty: the tcp check dials KUBERNETES_SERVICE_HOST:PORT, the
		// loopback API server.
		"APISERVER_PROBE": "readyz",
		// A loopback API server cannot publish endpoints for default/kubernetes (see
		// BackendService), so the check looks at a Service that has one.
		"ENDPOINTS_SERVICE": metav1.NamespaceDefault + "/" + BackendService,
		"ENDPOINTS_CONNECT": "false",
		// Short rounds, so a failing node records its failure within seconds.
		"RETRY_BACKOFF_BASE": "200ms",
		"RETRY_BACKOFF_MAX":  "1s",
		"CHECK_TIMEOUT":      "5s",
		"LOG_LEVEL":          "debug",
		"LOG_FORMAT":         "json",
	}
}

// ApplyConfig edits the installed nodeready-config as an operator would: the shipped
// manifests/02-configmap.yaml with the loopback settings, then Options.Config, then
// overrides, applied with kubectl. Each call starts again from the shipped file, so
// ApplyConfig(ctx, nil) restores the configuration of Start. A setting the shipped file does
// not list is an error, as the file lists every setting.
//
// Agents read the configuration when their process starts: running agents keep theirs.
func (c *Cluster) ApplyConfig(ctx context.Context, overrides map[string]string) error {
	path := filepath.Join(c.repo, "manifests", "02-configmap.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	var cm corev1.ConfigMap
	if err := yaml.Unmarshal(data, &cm); err != nil {
		return fmt.Errorf("parse %s: %w", path, err)
	}
	if cm.Name != ConfigMapName || cm.Namespace != Namespace {
		return fmt.Errorf("%s holds %s/%s, not the agent's ConfigMap %s/%s", path, cm.Namespace, cm.Name, Namespace, ConfigMapName)
	}
	for _, settings := range []map[string]string{LoopbackConfig(), c.config, overrides} {
		for k, v := range settings {
			if _, ok := cm.Data[k]; !ok {
				return fmt.Errorf("setting %s: not in %s, which lists every setting", k, path)
			}
			cm.Data[k] = v
		}
	}
	out, err := yaml.Marshal(&cm)
	if err != nil {
		return fmt.Errorf("encode config: %w", err)
	}
	res, err := c.cp.Kubectl(ctx, bytes.NewReader(out), "apply", "-f", "-")
	if err != nil {
		return err
	}
	c.logf("kubectl apply nodeready-config: %s", strings.TrimSpace(res))
	return nil
}

// createBackendService creates BackendService and its EndpointSlice with one ready endpoint
// at backendIP.
func (c *Cluster) createBackendService(ctx context.Context) error {
	_, err := c.Client().CoreV1().Services(metav1.NamespaceDefault).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: BackendService},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create service %s: %w", BackendService, err)
	}
	_, err = c.Client().DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: BackendService + "-1",
			Labels: map[string]string{
				discoveryv1.LabelServiceName: BackendService,
				discoveryv1.LabelManagedBy:   "e2e.nodeready.io",
			},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{backendIP},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To[int32](443), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create endpointslice of %s: %w", BackendService, err)
	}
	return nil
}

// FindRepoRoot returns the repository the working directory is in, whose manifests/ Start
// installs: controlplane.RepoRoot.
func FindRepoRoot() (string, error) { return controlplane.RepoRoot() }
