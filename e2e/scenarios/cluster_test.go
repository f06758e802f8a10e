package scenarios

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/nodeready/nodeready/e2e/controlplane"
)

// AgentBinaryEnv names the agent binary the simulated kubelet runs; make e2e sets it.
const AgentBinaryEnv = "NODEREADY_BIN"

const (
	namespace       = "kube-system"
	daemonSetName   = "nodeready"
	configMapName   = "nodeready-config"
	agentSelector   = "app.kubernetes.io/name=nodeready"
	agentImage      = "ghcr.io/nodeready/nodeready:latest"
	verifiedLabel   = "node-ready/verified"
	startupTaintKey = "node-ready/unverified"

	// backendService stands in for default/kubernetes in the endpoints check; see
	// createBackendService.
	backendService = "nodeready-e2e-backend"
	backendIP      = "192.0.2.10" // TEST-NET-1, never routed
	dnsTestDomain  = "kubernetes.default.svc.cluster.local"
)

// cluster is a control plane with nodeready installed from the repository's manifests.
type cluster struct {
	cp      *controlplane.ControlPlane
	client  kubernetes.Interface
	repo    string
	kubectl string
	agent   string
}

// startCluster starts a control plane, creates the endpoints backend, installs nodeready
// with `kubectl apply -f manifests/` and points its configuration at loopback targets. No
// node exists yet, so no agent has started with the defaults.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	repo := repoRoot(t)
	agent := os.Getenv(AgentBinaryEnv)
	if agent == "" {
		agent = filepath.Join(repo, "bin", "nodeready")
	}
	_, err := os.Stat(agent)
	require.NoError(t, err, "agent binary: run make build (or set %s)", AgentBinaryEnv)
	binDir, err := controlplane.DefaultBinDir()
	require.NoError(t, err)
	kubectl := filepath.Join(binDir, "kubectl")
	_, err = os.Stat(kubectl)
	require.NoError(t, err, "kubectl: run scripts/build-control-plane.sh (or make e2e)")

	cp := controlplane.StartForTest(t)
	c := &cluster{cp: cp, client: cp.Client(), repo: repo, kubectl: kubectl, agent: agent}
	c.createBackendService(t)
	t.Logf("kubectl apply -f manifests/:\n%s", c.run(t, "apply", "-f", filepath.Join(repo, "manifests")))
	c.applyConfig(t)
	return c
}

// run runs kubectl as the cluster admin and returns its output.
func (c *cluster) run(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.kubectl, append([]string{"--kubeconfig", c.cp.Kubeconfig()}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Run(), "kubectl %v:\n%s", args, out.String())
	return out.String()
}

// applyConfig edits the installed nodeready-config as an operator would: the shipped file
// with loopback targets and short back-offs, applied with kubectl.
func (c *cluster) applyConfig(t *testing.T) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(c.repo, "manifests", "02-configmap.yaml"))
	require.NoError(t, err)
	var cm corev1.ConfigMap
	require.NoError(t, yaml.Unmarshal(data, &cm))
	require.Equal(t, configMapName, cm.Name, "manifests/02-configmap.yaml holds the agent's ConfigMap")

	for k, v := range map[string]string{
		// Each node's DNS_NAMESERVER is its own node-local server, set by the kubelet's
		// NodeEnv hook; the name is answered by those servers.
		"DNS_TEST_DOMAINS": dnsTestDomain,
		// TCP_TARGETS stays empty: the tcp check dials KUBERNETES_SERVICE_HOST:PORT, the
		// loopback API server.
		"APISERVER_PROBE": "readyz",
		// A loopback API server cannot publish endpoints for default/kubernetes (see
		// createBackendService), so the check looks at a Service that has one.
		"ENDPOINTS_SERVICE": "default/" + backendService,
		"ENDPOINTS_CONNECT": "false",
		// Short rounds, so a failing node records its failure within seconds.
		"RETRY_BACKOFF_BASE": "200ms",
		"RETRY_BACKOFF_MAX":  "1s",
		"CHECK_TIMEOUT":      "5s",
		"LOG_LEVEL":          "debug",
		"LOG_FORMAT":         "json",
	} {
		require.Contains(t, cm.Data, k, "manifests/02-configmap.yaml lists every setting")
		cm.Data[k] = v
	}
	out, err := yaml.Marshal(&cm)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "nodeready-config.yaml")
	require.NoError(t, os.WriteFile(path, out, 0o644))
	c.run(t, "apply", "-f", path)
}

// createBackendService creates the Service the endpoints check looks at. kube-apiserver on
// loopback cannot publish its own address for default/kubernetes (Endpoints and EndpointSlice
// validation rejects 127.0.0.0/8), so that Service has no endpoints here. This one has a ready
// endpoint at a documentation-range address; nothing listens there, so the check runs with
// ENDPOINTS_CONNECT=false and proves the agent's service discovery (RBAC, list, readiness),
// not the pod network.
func (c *cluster) createBackendService(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	_, err := c.client.CoreV1().Services(metav1.NamespaceDefault).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: backendService},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.client.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: backendService + "-1",
			Labels: map[string]string{
				discoveryv1.LabelServiceName: backendService,
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
	require.NoError(t, err)
}

// repoRoot walks up from the working directory to the repository holding manifests/.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "manifests", "03-daemonset.yaml")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no manifests/03-daemonset.yaml above the working directory")
		dir = parent
	}
}
