package scenarios

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeready/nodeready/e2e/kubelet"
)

// LogsEnv, when set, names a directory where every scenario's agent and kubelet logs are
// kept, also after a passing run.
const LogsEnv = "NODEREADY_E2E_LOGS"

const (
	scenarioLabel = "e2e.nodeready.io/scenario"
	teamLabel     = "example.com/team"
	pollInterval  = 200 * time.Millisecond
	// waitTimeout bounds every wait for the cluster to react; generous for two loaded cores.
	waitTimeout = 2 * time.Minute
)

// foreignTaints are on every node besides the startup taint and must survive the release:
// another owner's taint, and one with the startup taint's key but another effect, which is
// not nodeready's. Both are PreferNoSchedule because the DaemonSet tolerates no other
// NoSchedule taint, and a node with one would never get an agent.
var foreignTaints = []corev1.Taint{
	{Key: "example.com/dedicated", Value: "infra", Effect: corev1.TaintEffectPreferNoSchedule},
	{Key: startupTaintKey, Value: "true", Effect: corev1.TaintEffectPreferNoSchedule},
}

var startupTaint = corev1.Taint{Key: startupTaintKey, Value: "true", Effect: corev1.TaintEffectNoSchedule}

// fleet is one scenario's nodes, their node-local DNS servers and the kubelet that runs
// them. Scenarios share the control plane; node names and the scenario label keep their
// nodes apart, and cleanup removes them.
type fleet struct {
	c        *cluster
	scenario string
	kubelet  *kubelet.Kubelet
	logDir   string
	history  *nodeHistory

	mu    sync.Mutex
	dns   map[string]*dnsServer
	env   map[string]map[string]string // node -> variables the node sets for its pods
	nodes []string
}

func (c *cluster) newFleet(t *testing.T, scenario string) *fleet {
	t.Helper()
	// Logs are kept after a failure, or always when LogsEnv names a directory for them.
	keep := os.Getenv(LogsEnv)
	if keep != "" {
		require.NoError(t, os.MkdirAll(keep, 0o755))
	}
	logDir, err := os.MkdirTemp(keep, "nodeready-e2e-"+scenario+"-")
	require.NoError(t, err)
	f := &fleet{c: c, scenario: scenario, logDir: logDir, dns: map[string]*dnsServer{}, env: map[string]map[string]string{}}
	host, port := c.cp.APIServerHostPort()
	f.kubelet, err = kubelet.New(c.client, kubelet.Options{
		AgentBinary:   c.agent,
		APIServerURL:  c.cp.APIServerURL(),
		CAFile:        c.cp.CAFile(),
		APIServerHost: host,
		APIServerPort: port,
		LogDir:        logDir,
		NodeEnv:       f.nodeEnv,
	})
	require.NoError(t, err)
	f.history = watchNodes(t, c.client, scenarioLabel+"="+scenario)
	require.NoError(t, f.kubelet.Run(t.Context()))

	t.Cleanup(func() {
		if t.Failed() {
			f.describe(t)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, n := range f.nodeNames() {
			if err := f.kubelet.RemoveNode(ctx, n); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
		f.kubelet.Stop()
		if t.Failed() || keep != "" {
			t.Logf("agent and kubelet logs kept in %s", logDir)
			return
		}
		os.RemoveAll(logDir)
	})
	return f
}

// nodeEnv gives each node's agents that node's DNS server, as a node-local DNS cache, and
// whatever else setEnv put there.
func (f *fleet) nodeEnv(node string) map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	env := maps.Clone(f.env[node])
	if env == nil {
		env = map[string]string{}
	}
	if s := f.dns[node]; s != nil {
		env["DNS_NAMESERVER"] = s.addr
	}
	return env
}

// setEnv sets the variables the node gives its agents from their next start on; nil
// removes them.
func (f *fleet) setEnv(node string, env map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.env[node] = env
}

// addNode registers a node as Karpenter would: the startup taint, foreign taints and labels
// that must survive. brokenDNS makes its DNS server answer NXDOMAIN from the start.
func (f *fleet) addNode(t *testing.T, name string, brokenDNS bool) {
	t.Helper()
	s := startDNS(t, dnsTestDomain, [4]byte{10, 96, 0, 1})
	s.broken.Store(brokenDNS)
	f.mu.Lock()
	f.dns[name] = s
	f.nodes = append(f.nodes, name)
	f.mu.Unlock()
	err := f.kubelet.AddNode(t.Context(), name, kubelet.NodeOptions{
		Labels: map[string]string{scenarioLabel: f.scenario, teamLabel: "infra"},
		Taints: append([]corev1.Taint{startupTaint}, foreignTaints...),
	})
	require.NoError(t, err)
}

// addNodes adds n nodes named <scenario>-<i> and returns their names.
func (f *fleet) addNodes(t *testing.T, n int, brokenDNS bool) []string {
	t.Helper()
	names := make([]string, 0, n)
	for i := range n {
		name := fmt.Sprintf("%s-%d", f.scenario, len(f.nodeNames())+i)
		names = append(names, name)
	}
	for _, name := range names {
		f.addNode(t, name, brokenDNS)
	}
	return names
}

func (f *fleet) nodeNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.nodes...)
}

func (f *fleet) setDNSBroken(node string, broken bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dns[node].broken.Store(broken)
}

// waitReleased waits until every node carries the verified label and exactly the foreign
// taints: the startup taint gone, and the node lifecycle controller's not-ready taint from
// registration gone too.
func (f *fleet) waitReleased(t *testing.T, nodes ...string) {
	t.Helper()
	for _, name := range nodes {
		var last *corev1.Node
		err := poll(t, func(ctx context.Context) (bool, error) {
			n, err := f.c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			last = n
			return n.Labels[verifiedLabel] == "true" && sameTaints(foreignTaints, n.Spec.Taints), nil
		})
		require.NoError(t, err, "node %s not released; last seen labels %v, taints %v", name, labelsOf(last), taintsOf(last))
		assert.Equal(t, "infra", last.Labels[teamLabel], "node %s lost a foreign label", name)
		assert.Equal(t, f.scenario, last.Labels[scenarioLabel], "node %s lost a foreign label", name)
	}
}

// waitAgentsGone waits until no agent pod is bound to the nodes in the API and the kubelet
// is finished with every pod it ran there.
func (f *fleet) waitAgentsGone(t *testing.T, nodes ...string) {
	t.Helper()
	for _, name := range nodes {
		var left []string
		err := poll(t, func(ctx context.Context) (bool, error) {
			pods, err := f.agentPodsInAPI(ctx, name)
			if err != nil {
				return false, nil
			}
			left = left[:0]
			for _, p := range pods {
				left = append(left, p.Name)
			}
			for _, p := range f.podsOn(name) {
				if !p.Done {
					left = append(left, "kubelet:"+p.Name)
				}
			}
			return len(left) == 0, nil
		})
		require.NoError(t, err, "agent pods left on %s: %v", name, left)
	}
}

// waitAgentStarted waits until the kubelet has started an agent process on the node; the
// process may have finished already.
func (f *fleet) waitAgentStarted(t *testing.T, node string) {
	t.Helper()
	err := poll(t, func(context.Context) (bool, error) {
		for _, p := range f.podsOn(node) {
			if p.Running || len(p.Exits) > 0 {
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "no agent started on %s", node)
}

// waitAgentRunning waits until an agent process runs on the node and returns its pod.
func (f *fleet) waitAgentRunning(t *testing.T, node string) kubelet.PodInfo {
	t.Helper()
	var pod kubelet.PodInfo
	err := poll(t, func(context.Context) (bool, error) {
		for _, p := range f.podsOn(node) {
			if p.Running {
				pod = p
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "no agent running on %s", node)
	return pod
}

// waitMetric waits until the running agent of the pod reports metric >= min on /metrics.
func (f *fleet) waitMetric(t *testing.T, pod kubelet.PodInfo, metric string, min float64) {
	t.Helper()
	var last float64
	var lastErr error
	err := poll(t, func(ctx context.Context) (bool, error) {
		p, ok := f.kubelet.Pod(pod.UID)
		if !ok || !p.Running {
			return false, fmt.Errorf("agent of pod %s is not running", pod.Name)
		}
		last, lastErr = scrape(ctx, p.MetricsAddr, metric)
		return lastErr == nil && last >= min, nil
	})
	require.NoError(t, err, "%s of pod %s: last %v (%v), want >= %v", metric, pod.Name, last, lastErr, min)
}

// podsOn returns the pods the kubelet ran on the node.
func (f *fleet) podsOn(node string) []kubelet.PodInfo {
	var on []kubelet.PodInfo
	for _, p := range f.kubelet.Pods() {
		if p.Node == node {
			on = append(on, p)
		}
	}
	return on
}

func (f *fleet) agentPodsInAPI(ctx context.Context, node string) ([]corev1.Pod, error) {
	pods, err := f.c.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{
		LabelSelector: agentSelector,
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		return nil, err
	}
	return pods.Items, nil
}

// assertVerifiedBy asserts that the node ran exactly pods agent pods, each started once
// (no restarts) and each ending with exit code 0 after the kubelet's SIGTERM, within the
// grace period. It returns the pods, oldest first.
func (f *fleet) assertVerifiedBy(t *testing.T, node string, pods int) []kubelet.PodInfo {
	t.Helper()
	on := f.podsOn(node)
	require.Len(t, on, pods, "agent pods on %s", node)
	for _, p := range on {
		assert.Zero(t, p.Restarts, "restarts of %s", p.Name)
		if assert.Len(t, p.Exits, 1, "exits of %s", p.Name) {
			e := p.Exits[0]
			assert.Equal(t, 0, e.Code, "exit code of %s", p.Name)
			assert.True(t, e.Signaled, "%s ended on its own, not on the kubelet's SIGTERM", p.Name)
			assert.False(t, e.Killed, "%s outlived its grace period", p.Name)
		}
	}
	assert.Contains(t, f.kubelet.Images(node), agentImage, "image pulled on %s", node)
	// Oldest first: each pod ended before the next one started.
	slices.SortFunc(on, func(a, b kubelet.PodInfo) int {
		if len(a.Exits) == 0 || len(b.Exits) == 0 {
			return len(b.Exits) - len(a.Exits)
		}
		return a.Exits[0].At.Compare(b.Exits[0].At)
	})
	return on
}

// assertHistory asserts that the node went through exactly the states want, in order. It
// first waits until the node watch has seen the last of them: after an API server restart
// the watch may lag behind the node.
func (f *fleet) assertHistory(t *testing.T, node string, want ...nodeState) {
	t.Helper()
	err := poll(t, func(context.Context) (bool, error) {
		got := f.history.states(node)
		return len(got) > 0 && got[len(got)-1] == want[len(want)-1], nil
	})
	require.NoError(t, err, "node watch never saw %s in %v; states %v", node, want[len(want)-1], f.history.states(node))
	assert.Equal(t, want, f.history.states(node), "states of %s", node)
}

// describe logs the scenario's nodes and the kubelet's pods, for a failed run.
func (f *fleet) describe(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, name := range f.nodeNames() {
		n, err := f.c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Logf("node %s: %v", name, err)
			continue
		}
		t.Logf("node %s: labels %v taints %v history %v", name, labelsOf(n), taintsOf(n), f.history.states(name))
	}
	for _, p := range f.kubelet.Pods() {
		t.Logf("pod %s/%s on %s: running=%v done=%v restarts=%d exits=%+v", p.Namespace, p.Name, p.Node, p.Running, p.Done, p.Restarts, p.Exits)
	}
}

func poll(t *testing.T, cond wait.ConditionWithContextFunc) error {
	t.Helper()
	return wait.PollUntilContextTimeout(t.Context(), pollInterval, waitTimeout, true, cond)
}

// sameTaints reports whether got holds exactly the taints of want, in any order.
func sameTaints(want, got []corev1.Taint) bool {
	if len(want) != len(got) {
		return false
	}
	for _, w := range want {
		if !slices.ContainsFunc(got, func(g corev1.Taint) bool { return g.MatchTaint(&w) && g.Value == w.Value }) {
			return false
		}
	}
	return true
}

func labelsOf(n *corev1.Node) map[string]string {
	if n == nil {
		return nil
	}
	return n.Labels
}

func taintsOf(n *corev1.Node) []string {
	if n == nil {
		return nil
	}
	var s []string
	for _, t := range n.Spec.Taints {
		s = append(s, t.ToString())
	}
	return s
}
