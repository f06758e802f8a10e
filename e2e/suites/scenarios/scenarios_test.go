package scenarios

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeready/nodeready/e2e/framework/controlplane"
	"github.com/nodeready/nodeready/e2e/framework/harness"
	"github.com/nodeready/nodeready/e2e/framework/kubelet"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// TestNodeReady runs the scenarios on one control plane with nodeready installed from
// manifests/. They run one after another, each with its own nodes and kubelet, so the API
// server restart of the last one disturbs no other.
func TestNodeReady(t *testing.T) {
	c := harness.StartForTest(t, harness.Options{})

	t.Run("verifies tainted nodes and exits on SIGTERM", func(t *testing.T) { testVerify(t, c) })
	t.Run("re-verifies a node whose label was removed", func(t *testing.T) { testReverify(t, c) })
	t.Run("failing check keeps the node tainted until it heals", func(t *testing.T) { testFailingCheck(t, c) })
	t.Run("verifies nodes added after install", func(t *testing.T) { testScaleUp(t, c) })
	t.Run("crash-loops on a bad setting and recovers once it is fixed", func(t *testing.T) { testCrashLoop(t, c) })
	t.Run("a bad setting in nodeready-config stops the agent, the node stays tainted", func(t *testing.T) { testBadConfigMap(t, c) })
	t.Run("the own-node policy refuses the agent's write to another node", func(t *testing.T) { testOwnNode(t, c) })
	t.Run("finishes verification after an API server restart", func(t *testing.T) { testAPIServerRestart(t, c) })
}

// testVerify: five tainted nodes each get the label and lose exactly the startup taint, in
// one write; the DaemonSet controller then deletes every agent pod, and every agent exits 0
// on its SIGTERM.
func testVerify(t *testing.T, c *harness.Cluster) {
	f := harness.NewFleetForTest(t, c, "verify")
	nodes := addNodes(t, f, 5, harness.NodeOptions{})

	require.NoError(t, f.WaitReleased(t.Context(), nodes...))
	require.NoError(t, f.WaitAgentsGone(t.Context(), nodes...))

	var podNames []string
	for _, n := range nodes {
		// The simulated kubelet reports the control plane's release, whichever the run chose.
		assert.Equal(t, c.KubernetesVersion(), harness.RequireNode(t, c, n).Status.NodeInfo.KubeletVersion, "kubelet version of %s", n)
		pods := assertVerifiedBy(t, f, n, 1)
		podNames = append(podNames, pods[0].Name)
		assertHistory(t, f, n, harness.Unverified, harness.Released)
	}
	// The pods were deleted by the DaemonSet controller, because the label took the nodes
	// out of its node affinity, and not by anything else.
	waitDaemonSetDeleted(t, c, podNames)
}

// testReverify: removing the label with kubectl brings a new agent to that node only, and
// it labels the node again and goes away.
func testReverify(t *testing.T, c *harness.Cluster) {
	f := harness.NewFleetForTest(t, c, "reverify")
	nodes := addNodes(t, f, 2, harness.NodeOptions{})
	target, other := nodes[0], nodes[1]
	require.NoError(t, f.WaitReleased(t.Context(), nodes...))
	require.NoError(t, f.WaitAgentsGone(t.Context(), nodes...))
	first := assertVerifiedBy(t, f, target, 1)[0]

	_, err := c.Kubectl(t.Context(), "label", "node", target, wellknown.VerifiedLabel+"-")
	require.NoError(t, err)

	err = harness.Poll(t, func(context.Context) (bool, error) {
		pods := f.PodsOn(target)
		return len(pods) == 2 && pods[0].Done && pods[1].Done, nil
	})
	require.NoError(t, err, "no second agent pod on %s ran to the end", target)
	require.NoError(t, f.WaitReleased(t.Context(), target))
	require.NoError(t, f.WaitAgentsGone(t.Context(), target))

	pods := assertVerifiedBy(t, f, target, 2)
	assert.Equal(t, first.UID, pods[0].UID)
	assert.NotEqual(t, first.UID, pods[1].UID, "a new pod, not the old one")
	assertVerifiedBy(t, f, other, 1)
	assertHistory(t, f, target, harness.Unverified, harness.Released, harness.Unlabelled, harness.Released)
	assertHistory(t, f, other, harness.Unverified, harness.Released)
}

// testFailingCheck: a node whose DNS answers NXDOMAIN stays tainted with its agent running
// (not restarted, not deleted) while the others are released; once its DNS answers, the same
// agent releases it.
func testFailingCheck(t *testing.T, c *harness.Cluster) {
	f := harness.NewFleetForTest(t, c, "dnsfail")
	bad := addNodes(t, f, 1, harness.NodeOptions{BrokenDNS: true})[0]
	good := addNodes(t, f, 2, harness.NodeOptions{})

	require.NoError(t, f.WaitReleased(t.Context(), good...))
	require.NoError(t, f.WaitAgentsGone(t.Context(), good...))
	agent, err := f.WaitAgentRunning(t.Context(), bad)
	require.NoError(t, err)
	// The agent has used up MAX_RETRIES rounds and recorded the failure, and goes on.
	require.NoError(t, f.WaitMetric(t.Context(), agent, "nodeready_verification_failures_total", 1))

	node, err := c.Client().CoreV1().Nodes().Get(t.Context(), bad, metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotContains(t, node.Labels, wellknown.VerifiedLabel)
	assert.Contains(t, taintsOf(node), wellknown.StartupTaintString)
	pod, err := c.Client().CoreV1().Pods(agent.Namespace).Get(t.Context(), agent.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, pod.DeletionTimestamp, "agent pod of the failing node is being deleted")
	assert.Equal(t, corev1.PodRunning, pod.Status.Phase)
	// READY means the agent runs (no readiness probe, manifests/03-daemonset.yaml): the held
	// node's state is on the Node, not in a readiness failing every period.
	assert.Equal(t, corev1.ConditionTrue, podCondition(pod, corev1.PodReady), "agent pod of a held node, its agent running")
	if assert.Len(t, pod.Status.ContainerStatuses, 1) {
		assert.Zero(t, pod.Status.ContainerStatuses[0].RestartCount)
	}
	now, _ := f.Kubelet().Pod(agent.UID)
	assert.True(t, now.Running, "agent process of the failing node ended")
	assert.Empty(t, now.Exits)

	f.DNS(bad).SetBroken(false)

	require.NoError(t, f.WaitReleased(t.Context(), bad))
	require.NoError(t, f.WaitAgentsGone(t.Context(), bad))
	pods := assertVerifiedBy(t, f, bad, 1)
	assert.Equal(t, agent.UID, pods[0].UID, "released by the same pod")
	for _, n := range append(good, bad) {
		assertHistory(t, f, n, harness.Unverified, harness.Released)
	}
}

// testScaleUp: nodes that join after the install, one after another while earlier ones are
// still being verified, are verified too.
func testScaleUp(t *testing.T, c *harness.Cluster) {
	f := harness.NewFleetForTest(t, c, "scaleup")
	initial := addNodes(t, f, 2, harness.NodeOptions{})
	require.NoError(t, f.WaitReleased(t.Context(), initial...))
	require.NoError(t, f.WaitAgentsGone(t.Context(), initial...))

	var added []string
	for range 3 {
		n := addNodes(t, f, 1, harness.NodeOptions{})[0]
		added = append(added, n)
		// The next node joins once this one's agent has started: nodes arrive one by one
		// while the DaemonSet is busy with the previous ones.
		require.NoError(t, f.WaitAgentStarted(t.Context(), n))
	}

	require.NoError(t, f.WaitReleased(t.Context(), added...))
	require.NoError(t, f.WaitAgentsGone(t.Context(), added...))
	for _, n := range append(initial, added...) {
		assertVerifiedBy(t, f, n, 1)
		assertHistory(t, f, n, harness.Unverified, harness.Released)
	}
}

// testCrashLoop: a node whose agents get an invalid setting sees them exit 2 at start and
// restarted with back-off, as a kubelet does with restartPolicy Always, and stays tainted;
// once the setting is fixed, the next restart of the same pod releases the node.
func testCrashLoop(t *testing.T, c *harness.Cluster) {
	f := harness.NewFleetForTest(t, c, "crashloop")
	node := addNodes(t, f, 1, harness.NodeOptions{Env: map[string]string{"TAINT_EFFECT": "NoRun"}})[0]

	var pod *corev1.Pod
	err := harness.Poll(t, func(ctx context.Context) (bool, error) {
		pods, err := f.AgentPods(ctx, node)
		if err != nil || len(pods) != 1 || len(pods[0].Status.ContainerStatuses) != 1 {
			return false, nil
		}
		pod = &pods[0]
		return pod.Status.ContainerStatuses[0].RestartCount >= 2, nil
	})
	require.NoError(t, err, "the agent pod on %s was not restarted twice", node)
	last := pod.Status.ContainerStatuses[0].LastTerminationState.Terminated
	require.NotNil(t, last, "no last state of a restarted container")
	assert.EqualValues(t, 2, last.ExitCode, "exit code of an invalid configuration")
	n, err := c.Client().CoreV1().Nodes().Get(t.Context(), node, metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotContains(t, n.Labels, wellknown.VerifiedLabel)
	assert.Contains(t, taintsOf(n), wellknown.StartupTaintString)

	f.SetEnv(node, nil)

	require.NoError(t, f.WaitReleased(t.Context(), node))
	require.NoError(t, f.WaitAgentsGone(t.Context(), node))
	pods := f.PodsOn(node)
	require.Len(t, pods, 1, "one pod, restarted in place")
	p := pods[0]
	assert.Equal(t, pod.UID, p.UID)
	require.GreaterOrEqual(t, len(p.Exits), 3)
	assert.Equal(t, len(p.Exits)-1, p.Restarts)
	for _, e := range p.Exits[:len(p.Exits)-1] {
		assert.Equal(t, 2, e.Code, "exit code of an invalid configuration")
		assert.False(t, e.Signaled, "the agent exited on its own")
	}
	final := p.Exits[len(p.Exits)-1]
	assert.Equal(t, 0, final.Code)
	assert.True(t, final.Signaled, "the last run ended on the kubelet's SIGTERM")
	assertHistory(t, f, node, harness.Unverified, harness.Released)
}

// testAPIServerRestart: agents in the middle of their rounds lose the API server for a
// while; once it is back they finish, and no node is ever half released.
func testAPIServerRestart(t *testing.T, c *harness.Cluster) {
	f := harness.NewFleetForTest(t, c, "restart")
	nodes := addNodes(t, f, 3, harness.NodeOptions{BrokenDNS: true})
	var agents []kubelet.PodInfo
	for _, n := range nodes {
		a, err := f.WaitAgentRunning(t.Context(), n)
		require.NoError(t, err)
		require.NoError(t, f.WaitMetric(t.Context(), a, "nodeready_rounds_total", 3))
		agents = append(agents, a)
	}

	start := time.Now()
	require.NoError(t, c.ControlPlane().StopAPIServer())
	t.Logf("API server stopped in %s", time.Since(start).Round(time.Millisecond))
	for _, n := range nodes {
		f.DNS(n).SetBroken(false)
	}
	// The outage: every check that needs the API server fails for this long.
	select {
	case <-t.Context().Done():
		t.Fatal("test ended during the API server outage")
	case <-time.After(10 * time.Second):
	}
	startCtx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	start = time.Now()
	require.NoError(t, c.ControlPlane().StartAPIServer(startCtx))
	t.Logf("API server ready again in %s", time.Since(start).Round(time.Millisecond))

	start = time.Now()
	require.NoError(t, f.WaitReleased(t.Context(), nodes...))
	t.Logf("nodes released %s after the API server was back", time.Since(start).Round(time.Millisecond))
	require.NoError(t, f.WaitAgentsGone(t.Context(), nodes...))
	t.Logf("agent pods gone %s after the API server was back", time.Since(start).Round(time.Millisecond))
	for i, n := range nodes {
		pods := assertVerifiedBy(t, f, n, 1)
		assert.Equal(t, agents[i].UID, pods[0].UID, "released by the agent that rode out the outage")
		assertHistory(t, f, n, harness.Unverified, harness.Released)
	}
}

// testBadConfigMap: an invalid value in nodeready-config, the ConfigMap every agent reads
// (envFrom), stops every agent at start, exit code 2, with a message naming the variable and
// the value; the node stays tainted and unlabelled. Once the ConfigMap is fixed, the next
// restart of the same pod releases the node.
func testBadConfigMap(t *testing.T, c *harness.Cluster) {
	require.NoError(t, c.ApplyConfig(t.Context(), map[string]string{"MAX_RETRIES": "many"}))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.ApplyConfig(ctx, nil); err != nil {
			t.Errorf("restore config: %v", err)
		}
	})
	f := harness.NewFleetForTest(t, c, "badconfig")
	node := addNodes(t, f, 1, harness.NodeOptions{})[0]

	var pod corev1.Pod
	err := harness.Poll(t, func(ctx context.Context) (bool, error) {
		pods, err := f.AgentPods(ctx, node)
		if err != nil || len(pods) != 1 || len(pods[0].Status.ContainerStatuses) != 1 {
			return false, nil
		}
		pod = pods[0]
		return pod.Status.ContainerStatuses[0].LastTerminationState.Terminated != nil, nil
	})
	require.NoError(t, err, "the agent on %s never ended", node)
	assert.EqualValues(t, 2, pod.Status.ContainerStatuses[0].LastTerminationState.Terminated.ExitCode)
	// The first run's output, as `kubectl logs --previous` shows it.
	out, err := os.ReadFile(filepath.Join(f.LogDir(), fmt.Sprintf("%s_%s_0.log", pod.Namespace, pod.Name)))
	require.NoError(t, err)
	assert.Contains(t, string(out), `MAX_RETRIES="many"`)
	n := harness.RequireNode(t, c, node)
	assert.NotContains(t, n.Labels, wellknown.VerifiedLabel)
	assert.Contains(t, taintsOf(n), wellknown.StartupTaintString)

	require.NoError(t, c.ApplyConfig(t.Context(), nil))
	require.NoError(t, f.WaitReleased(t.Context(), node))
	assertHistory(t, f, node, harness.Unverified, harness.Released)
}

// testOwnNode: the agent on node A is told it runs on node B (NODE_NAME), whose own agent
// never passes its checks. Its checks pass and it tries to release B with the token the
// kubelet got for its pod: the policy in manifests/04-admission-policy.yaml refuses, and the
// agent reports the refusal in an Event about B. Neither node is released. That token names
// node A in the user extra the policy reads.
func testOwnNode(t *testing.T, c *harness.Cluster) {
	f := harness.NewFleetForTest(t, c, "ownnode")
	other, own := f.Name()+"-other", f.Name()+"-own"
	require.NoError(t, f.AddNode(t.Context(), other, harness.NodeOptions{BrokenDNS: true}))
	require.NoError(t, f.AddNode(t.Context(), own, harness.NodeOptions{Env: map[string]string{"NODE_NAME": other}}))

	// The agent speaks only for its own node: its release of the other node is refused, and
	// so is its ReleaseFailed Event about it. The refusal is in the agent's log.
	want := "nodeready: write to node " + other + " refused: the agent on node " + own + " may change only its own node"
	var logs string
	err := harness.Poll(t, func(context.Context) (bool, error) {
		var err error
		logs, err = f.AgentLogs()
		return err == nil && strings.Contains(logs, want) && strings.Contains(logs, "nodeready: Event refused"), nil
	})
	require.NoError(t, err, "the agent never logged both refusals; its log:\n%s", logs)
	harness.RequireNoNodeEvent(t, c, other, "ReleaseFailed")
	for _, name := range []string{other, own} {
		n := harness.RequireNode(t, c, name)
		assert.NotContains(t, n.Labels, wellknown.VerifiedLabel, "label on %s", name)
		assert.Contains(t, taintsOf(n), wellknown.StartupTaintString, "startup taint gone from %s", name)
	}

	// What the API server makes of a token bound to that agent pod, as the kubelet's is.
	pods, err := f.AgentPods(t.Context(), own)
	require.NoError(t, err)
	require.Len(t, pods, 1)
	pod := pods[0]
	agent := controlplane.ServiceAccountClientForTest(t, c.ControlPlane(), pod.Namespace, pod.Spec.ServiceAccountName, pod.Name, pod.UID)
	review, err := agent.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, authenticationv1.ExtraValue{own}, review.Status.UserInfo.Extra["authentication.kubernetes.io/node-name"])
}
