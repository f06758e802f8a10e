package scenarios

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/nodeready/nodeready/e2e/kubelet"
)

// TestNodeReady runs the scenarios on one control plane with nodeready installed from
// manifests/. They run one after another, each with its own nodes and kubelet, so the API
// server restart of the last one disturbs no other.
func TestNodeReady(t *testing.T) {
	c := startCluster(t)

	t.Run("verifies tainted nodes and exits on SIGTERM", func(t *testing.T) { testVerify(t, c) })
	t.Run("re-verifies a node whose label was removed", func(t *testing.T) { testReverify(t, c) })
	t.Run("failing check keeps the node tainted until it heals", func(t *testing.T) { testFailingCheck(t, c) })
	t.Run("verifies nodes added after install", func(t *testing.T) { testScaleUp(t, c) })
	t.Run("crash-loops on a bad setting and recovers once it is fixed", func(t *testing.T) { testCrashLoop(t, c) })
	t.Run("finishes verification after an API server restart", func(t *testing.T) { testAPIServerRestart(t, c) })
}

// testVerify: five tainted nodes each get the label and lose exactly the startup taint, in
// one write; the DaemonSet controller then deletes every agent pod, and every agent exits 0
// on its SIGTERM.
func testVerify(t *testing.T, c *cluster) {
	f := c.newFleet(t, "verify")
	nodes := f.addNodes(t, 5, false)

	f.waitReleased(t, nodes...)
	f.waitAgentsGone(t, nodes...)

	var podNames []string
	for _, n := range nodes {
		pods := f.assertVerifiedBy(t, n, 1)
		podNames = append(podNames, pods[0].Name)
		f.assertHistory(t, n, unverified, released)
	}
	// The pods were deleted by the DaemonSet controller, because the label took the nodes
	// out of its node affinity, and not by anything else.
	waitDaemonSetDeleted(t, c, podNames)
}

// testReverify: removing the label with kubectl brings a new agent to that node only, and
// it labels the node again and goes away.
func testReverify(t *testing.T, c *cluster) {
	f := c.newFleet(t, "reverify")
	nodes := f.addNodes(t, 2, false)
	target, other := nodes[0], nodes[1]
	f.waitReleased(t, nodes...)
	f.waitAgentsGone(t, nodes...)
	first := f.assertVerifiedBy(t, target, 1)[0]

	c.run(t, "label", "node", target, verifiedLabel+"-")

	err := poll(t, func(context.Context) (bool, error) {
		pods := f.podsOn(target)
		return len(pods) == 2 && pods[0].Done && pods[1].Done, nil
	})
	require.NoError(t, err, "no second agent pod on %s ran to the end", target)
	f.waitReleased(t, target)
	f.waitAgentsGone(t, target)

	pods := f.assertVerifiedBy(t, target, 2)
	assert.Equal(t, first.UID, pods[0].UID)
	assert.NotEqual(t, first.UID, pods[1].UID, "a new pod, not the old one")
	f.assertVerifiedBy(t, other, 1)
	f.assertHistory(t, target, unverified, released, unlabelled, released)
	f.assertHistory(t, other, unverified, released)
}

// testFailingCheck: a node whose DNS answers NXDOMAIN stays tainted with its agent running
// (not restarted, not deleted) while the others are released; once its DNS answers, the same
// agent releases it.
func testFailingCheck(t *testing.T, c *cluster) {
	f := c.newFleet(t, "dnsfail")
	bad := f.addNodes(t, 1, true)[0]
	good := f.addNodes(t, 2, false)

	f.waitReleased(t, good...)
	f.waitAgentsGone(t, good...)
	agent := f.waitAgentRunning(t, bad)
	// The agent has used up MAX_RETRIES rounds and recorded the failure, and goes on.
	f.waitMetric(t, agent, "nodeready_verification_failures_total", 1)

	node, err := c.client.CoreV1().Nodes().Get(t.Context(), bad, metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotContains(t, node.Labels, verifiedLabel)
	assert.Contains(t, taintsOf(node), startupTaint.ToString())
	pod, err := c.client.CoreV1().Pods(agent.Namespace).Get(t.Context(), agent.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, pod.DeletionTimestamp, "agent pod of the failing node is being deleted")
	assert.Equal(t, corev1.PodRunning, pod.Status.Phase)
	assert.Equal(t, corev1.ConditionFalse, podCondition(pod, corev1.PodReady), "agent pod of an unverified node is ready")
	if assert.Len(t, pod.Status.ContainerStatuses, 1) {
		assert.Zero(t, pod.Status.ContainerStatuses[0].RestartCount)
	}
	now, _ := f.kubelet.Pod(agent.UID)
	assert.True(t, now.Running, "agent process of the failing node ended")
	assert.Empty(t, now.Exits)

	f.setDNSBroken(bad, false)

	f.waitReleased(t, bad)
	f.waitAgentsGone(t, bad)
	pods := f.assertVerifiedBy(t, bad, 1)
	assert.Equal(t, agent.UID, pods[0].UID, "released by the same pod")
	for _, n := range append(good, bad) {
		f.assertHistory(t, n, unverified, released)
	}
}

// testScaleUp: nodes that join after the install, one after another while earlier ones are
// still being verified, are verified too.
func testScaleUp(t *testing.T, c *cluster) {
	f := c.newFleet(t, "scaleup")
	initial := f.addNodes(t, 2, false)
	f.waitReleased(t, initial...)
	f.waitAgentsGone(t, initial...)

	var added []string
	for range 3 {
		n := f.addNodes(t, 1, false)[0]
		added = append(added, n)
		// The next node joins once this one's agent has started: nodes arrive one by one
		// while the DaemonSet is busy with the previous ones.
		f.waitAgentStarted(t, n)
	}

	f.waitReleased(t, added...)
	f.waitAgentsGone(t, added...)
	for _, n := range append(initial, added...) {
		f.assertVerifiedBy(t, n, 1)
		f.assertHistory(t, n, unverified, released)
	}
}

// testCrashLoop: a node whose agents get an invalid setting sees them exit 2 at start and
// restarted with back-off, as a kubelet does with restartPolicy Always, and stays tainted;
// once the setting is fixed, the next restart of the same pod releases the node.
func testCrashLoop(t *testing.T, c *cluster) {
	f := c.newFleet(t, "crashloop")
	node := fmt.Sprintf("%s-0", f.scenario)
	f.setEnv(node, map[string]string{"TAINT_EFFECT": "NoRun"})
	f.addNode(t, node, false)

	var pod *corev1.Pod
	err := poll(t, func(ctx context.Context) (bool, error) {
		pods, err := f.agentPodsInAPI(ctx, node)
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
	n, err := c.client.CoreV1().Nodes().Get(t.Context(), node, metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotContains(t, n.Labels, verifiedLabel)
	assert.Contains(t, taintsOf(n), startupTaint.ToString())

	f.setEnv(node, nil)

	f.waitReleased(t, node)
	f.waitAgentsGone(t, node)
	pods := f.podsOn(node)
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
	f.assertHistory(t, node, unverified, released)
}

// testAPIServerRestart: agents in the middle of their rounds lose the API server for a
// while; once it is back they finish, and no node is ever half released.
func testAPIServerRestart(t *testing.T, c *cluster) {
	f := c.newFleet(t, "restart")
	nodes := f.addNodes(t, 3, true)
	var agents []kubelet.PodInfo
	for _, n := range nodes {
		a := f.waitAgentRunning(t, n)
		f.waitMetric(t, a, "nodeready_rounds_total", 3)
		agents = append(agents, a)
	}

	start := time.Now()
	require.NoError(t, c.cp.StopAPIServer())
	t.Logf("API server stopped in %s", time.Since(start).Round(time.Millisecond))
	for _, n := range nodes {
		f.setDNSBroken(n, false)
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
	require.NoError(t, c.cp.StartAPIServer(startCtx))
	t.Logf("API server ready again in %s", time.Since(start).Round(time.Millisecond))

	start = time.Now()
	f.waitReleased(t, nodes...)
	t.Logf("nodes released %s after the API server was back", time.Since(start).Round(time.Millisecond))
	f.waitAgentsGone(t, nodes...)
	t.Logf("agent pods gone %s after the API server was back", time.Since(start).Round(time.Millisecond))
	for i, n := range nodes {
		pods := f.assertVerifiedBy(t, n, 1)
		assert.Equal(t, agents[i].UID, pods[0].UID, "released by the agent that rode out the outage")
		f.assertHistory(t, n, unverified, released)
	}
}

// waitDaemonSetDeleted waits for the DaemonSet controller's SuccessfulDelete event of every
// pod.
func waitDaemonSetDeleted(t *testing.T, c *cluster, pods []string) {
	t.Helper()
	missing := pods
	err := poll(t, func(ctx context.Context) (bool, error) {
		events, err := c.client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{
			FieldSelector: fields.Set{
				"involvedObject.kind": "DaemonSet",
				"involvedObject.name": daemonSetName,
				"reason":              "SuccessfulDelete",
			}.String(),
		})
		if err != nil {
			return false, nil
		}
		deleted := map[string]bool{}
		for _, e := range events.Items {
			deleted[e.Message] = true
		}
		missing = missing[:0:0]
		for _, p := range pods {
			if !deleted["Deleted pod: "+p] {
				missing = append(missing, p)
			}
		}
		return len(missing) == 0, nil
	})
	require.NoError(t, err, "no SuccessfulDelete event of the DaemonSet for %v", missing)
}

func podCondition(pod *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}
