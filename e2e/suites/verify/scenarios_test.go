package verify

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
	"k8s.io/apimachinery/pkg/fields"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/kubelet"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// TestNodeReady runs the scenarios on one control plane with nodeready installed from
// manifests/. They run one after another, each with its own nodes and kubelet, so the API
// server restart of the last one disturbs no other.
func TestNodeReady(t *testing.T) {
	fw := framework.New(t, framework.Options{})

	fw.Run("verifies tainted nodes and exits on SIGTERM", testVerify)
	fw.Run("re-verifies a node whose label was removed", testReverify)
	fw.Run("failing check keeps the node tainted until it heals", testFailingCheck)
	fw.Run("verifies nodes added after install", testScaleUp)
	fw.Run("crash-loops on a bad setting and recovers once it is fixed", testCrashLoop)
	fw.Run("a bad setting in nodeready-config stops the agent, the node stays tainted", testBadConfigMap)
	fw.Run("the own-node policy refuses the agent's write to another node", testOwnNode)
	fw.Run("kubectl nodeready shows, explains, releases and re-verifies nodes", testPlugin)
	fw.Run("finishes verification after an API server restart", testAPIServerRestart)
}

// testVerify: five tainted nodes each get the label and lose exactly the startup taint, in
// one write; the DaemonSet controller then deletes every agent pod, and every agent exits 0
// on its SIGTERM.
func testVerify(t *testing.T, fw *framework.Framework) {
	f := fw.NewFleet("verify")
	nodes := f.Add(5, framework.NodeOptions{})

	require.NoError(t, f.WaitReleased(t.Context(), nodes...))
	require.NoError(t, f.WaitAgentsGone(t.Context(), nodes...))

	var podNames []string
	for _, n := range nodes {
		// The simulated kubelet reports the control plane's release, whichever the run chose.
		assert.Equal(t, fw.KubernetesVersion(), fw.Node(n).Status.NodeInfo.KubeletVersion, "kubelet version of %s", n)
		pods := f.AssertVerifiedBy(n, 1)
		podNames = append(podNames, pods[0].Name)
		f.AssertHistory(n, framework.Unverified, framework.Released)
	}
	// The pods were deleted by the DaemonSet controller, because the label took the nodes
	// out of its node affinity, and not by anything else.
	waitDaemonSetDeleted(t, fw, podNames)
}

// testReverify: removing the label with kubectl brings a new agent to that node only, and
// it labels the node again and goes away.
func testReverify(t *testing.T, fw *framework.Framework) {
	f := fw.NewFleet("reverify")
	nodes := f.Add(2, framework.NodeOptions{})
	target, other := nodes[0], nodes[1]
	require.NoError(t, f.WaitReleased(t.Context(), nodes...))
	require.NoError(t, f.WaitAgentsGone(t.Context(), nodes...))
	first := f.AssertVerifiedBy(target, 1)[0]

	_, err := fw.Kubectl("label", "node", target, wellknown.VerifiedLabel+"-")
	require.NoError(t, err)

	err = framework.Poll(t, func(context.Context) (bool, error) {
		pods := f.PodsOn(target)
		return len(pods) == 2 && pods[0].Done && pods[1].Done, nil
	})
	require.NoError(t, err, "no second agent pod on %s ran to the end", target)
	require.NoError(t, f.WaitReleased(t.Context(), target))
	require.NoError(t, f.WaitAgentsGone(t.Context(), target))

	pods := f.AssertVerifiedBy(target, 2)
	assert.Equal(t, first.UID, pods[0].UID)
	assert.NotEqual(t, first.UID, pods[1].UID, "a new pod, not the old one")
	f.AssertVerifiedBy(other, 1)
	f.AssertHistory(target, framework.Unverified, framework.Released, framework.Unlabelled, framework.Released)
	f.AssertHistory(other, framework.Unverified, framework.Released)
}

// testFailingCheck: a node whose DNS answers NXDOMAIN stays tainted with its agent running
// (not restarted, not deleted) while the others are released; once its DNS answers, the same
// agent releases it.
func testFailingCheck(t *testing.T, fw *framework.Framework) {
	f := fw.NewFleet("dnsfail")
	bad := f.Add(1, framework.NodeOptions{BrokenDNS: true})[0]
	good := f.Add(2, framework.NodeOptions{})

	require.NoError(t, f.WaitReleased(t.Context(), good...))
	require.NoError(t, f.WaitAgentsGone(t.Context(), good...))
	agent, err := f.WaitAgentRunning(t.Context(), bad)
	require.NoError(t, err)
	// The agent has used up MAX_RETRIES rounds and recorded the failure, and goes on.
	require.NoError(t, f.WaitMetric(t.Context(), agent, "nodeready_verification_failures_total", 1))

	node, err := fw.Client().CoreV1().Nodes().Get(t.Context(), bad, metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotContains(t, node.Labels, wellknown.VerifiedLabel)
	assert.Contains(t, framework.Taints(node), wellknown.StartupTaintString)
	pod, err := fw.Client().CoreV1().Pods(agent.Namespace).Get(t.Context(), agent.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, pod.DeletionTimestamp, "agent pod of the failing node is being deleted")
	assert.Equal(t, corev1.PodRunning, pod.Status.Phase)
	// READY means the agent runs (no readiness probe, manifests/03-daemonset.yaml): the held
	// node's state is on the Node, not in a readiness failing every period.
	assert.Equal(t, corev1.ConditionTrue, framework.PodCondition(pod, corev1.PodReady), "agent pod of a held node, its agent running")
	if assert.Len(t, pod.Status.ContainerStatuses, 1) {
		assert.Zero(t, pod.Status.ContainerStatuses[0].RestartCount)
	}
	now, _ := f.Kubelet().Pod(agent.UID)
	assert.True(t, now.Running, "agent process of the failing node ended")
	assert.Empty(t, now.Exits)

	f.DNS(bad).SetBroken(false)

	require.NoError(t, f.WaitReleased(t.Context(), bad))
	require.NoError(t, f.WaitAgentsGone(t.Context(), bad))
	pods := f.AssertVerifiedBy(bad, 1)
	assert.Equal(t, agent.UID, pods[0].UID, "released by the same pod")
	for _, n := range append(good, bad) {
		f.AssertHistory(n, framework.Unverified, framework.Released)
	}
}

// testScaleUp: nodes that join after the install, one after another while earlier ones are
// still being verified, are verified too.
func testScaleUp(t *testing.T, fw *framework.Framework) {
	f := fw.NewFleet("scaleup")
	initial := f.Add(2, framework.NodeOptions{})
	require.NoError(t, f.WaitReleased(t.Context(), initial...))
	require.NoError(t, f.WaitAgentsGone(t.Context(), initial...))

	var added []string
	for range 3 {
		n := f.Add(1, framework.NodeOptions{})[0]
		added = append(added, n)
		// The next node joins once this one's agent has started: nodes arrive one by one
		// while the DaemonSet is busy with the previous ones.
		require.NoError(t, f.WaitAgentStarted(t.Context(), n))
	}

	require.NoError(t, f.WaitReleased(t.Context(), added...))
	require.NoError(t, f.WaitAgentsGone(t.Context(), added...))
	for _, n := range append(initial, added...) {
		f.AssertVerifiedBy(n, 1)
		f.AssertHistory(n, framework.Unverified, framework.Released)
	}
}

// testCrashLoop: a node whose agents get an invalid setting sees them exit 2 at start and
// restarted with back-off, as a kubelet does with restartPolicy Always, and stays tainted;
// once the setting is fixed, the next restart of the same pod releases the node.
func testCrashLoop(t *testing.T, fw *framework.Framework) {
	f := fw.NewFleet("crashloop")
	node := f.Add(1, framework.NodeOptions{Env: map[string]string{"TAINT_EFFECT": "NoRun"}})[0]

	var pod *corev1.Pod
	err := framework.Poll(t, func(ctx context.Context) (bool, error) {
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
	n, err := fw.Client().CoreV1().Nodes().Get(t.Context(), node, metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotContains(t, n.Labels, wellknown.VerifiedLabel)
	assert.Contains(t, framework.Taints(n), wellknown.StartupTaintString)

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
	f.AssertHistory(node, framework.Unverified, framework.Released)
}

// testAPIServerRestart: agents in the middle of their rounds lose the API server for a
// while; once it is back they finish, and no node is ever half released.
func testAPIServerRestart(t *testing.T, fw *framework.Framework) {
	f := fw.NewFleet("restart")
	nodes := f.Add(3, framework.NodeOptions{BrokenDNS: true})
	var agents []kubelet.PodInfo
	for _, n := range nodes {
		a, err := f.WaitAgentRunning(t.Context(), n)
		require.NoError(t, err)
		require.NoError(t, f.WaitMetric(t.Context(), a, "nodeready_rounds_total", 3))
		agents = append(agents, a)
	}

	start := time.Now()
	require.NoError(t, fw.ControlPlane().StopAPIServer())
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
	require.NoError(t, fw.ControlPlane().StartAPIServer(startCtx))
	t.Logf("API server ready again in %s", time.Since(start).Round(time.Millisecond))

	start = time.Now()
	require.NoError(t, f.WaitReleased(t.Context(), nodes...))
	t.Logf("nodes released %s after the API server was back", time.Since(start).Round(time.Millisecond))
	require.NoError(t, f.WaitAgentsGone(t.Context(), nodes...))
	t.Logf("agent pods gone %s after the API server was back", time.Since(start).Round(time.Millisecond))
	for i, n := range nodes {
		pods := f.AssertVerifiedBy(n, 1)
		assert.Equal(t, agents[i].UID, pods[0].UID, "released by the agent that rode out the outage")
		f.AssertHistory(n, framework.Unverified, framework.Released)
	}
}

// testBadConfigMap: an invalid value in nodeready-config, the ConfigMap every agent reads
// (envFrom), stops every agent at start, exit code 2, with a message naming the variable and
// the value; the node stays tainted and unlabelled. Once the ConfigMap is fixed, the next
// restart of the same pod releases the node.
func testBadConfigMap(t *testing.T, fw *framework.Framework) {
	require.NoError(t, fw.Cluster().ApplyConfig(t.Context(), map[string]string{"MAX_RETRIES": "many"}))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := fw.Cluster().ApplyConfig(ctx, nil); err != nil {
			t.Errorf("restore config: %v", err)
		}
	})
	f := fw.NewFleet("badconfig")
	node := f.Add(1, framework.NodeOptions{})[0]

	var pod corev1.Pod
	err := framework.Poll(t, func(ctx context.Context) (bool, error) {
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
	n := fw.Node(node)
	assert.NotContains(t, n.Labels, wellknown.VerifiedLabel)
	assert.Contains(t, framework.Taints(n), wellknown.StartupTaintString)

	require.NoError(t, fw.Cluster().ApplyConfig(t.Context(), nil))
	require.NoError(t, f.WaitReleased(t.Context(), node))
	f.AssertHistory(node, framework.Unverified, framework.Released)
}

// testOwnNode: the agent on node A is told it runs on node B (NODE_NAME), whose own agent
// never passes its checks. Its checks pass and it tries to release B with the token the
// kubelet got for its pod: the policy in manifests/04-admission-policy.yaml refuses, and the
// agent reports the refusal in an Event about B. Neither node is released. That token names
// node A in the user extra the policy reads.
func testOwnNode(t *testing.T, fw *framework.Framework) {
	f := fw.NewFleet("ownnode")
	other, own := f.Name()+"-other", f.Name()+"-own"
	require.NoError(t, f.AddNode(t.Context(), other, framework.NodeOptions{BrokenDNS: true}))
	require.NoError(t, f.AddNode(t.Context(), own, framework.NodeOptions{Env: map[string]string{"NODE_NAME": other}}))

	// The agent speaks only for its own node: its release of the other node is refused, and
	// so is its ReleaseFailed Event about it. The refusal is in the agent's log.
	want := "nodeready: write to node " + other + " refused: the agent on node " + own + " may change only its own node"
	var logs string
	err := framework.Poll(t, func(context.Context) (bool, error) {
		var err error
		logs, err = f.AgentLogs()
		return err == nil && strings.Contains(logs, want) && strings.Contains(logs, "nodeready: Event refused"), nil
	})
	require.NoError(t, err, "the agent never logged both refusals; its log:\n%s", logs)
	fw.RequireNoEvent(other, "ReleaseFailed")
	for _, name := range []string{other, own} {
		n := fw.Node(name)
		assert.NotContains(t, n.Labels, wellknown.VerifiedLabel, "label on %s", name)
		assert.Contains(t, framework.Taints(n), wellknown.StartupTaintString, "startup taint gone from %s", name)
	}

	// What the API server makes of a token bound to that agent pod, as the kubelet's is.
	pods, err := f.AgentPods(t.Context(), own)
	require.NoError(t, err)
	require.Len(t, pods, 1)
	pod := pods[0]
	agent := fw.TokenClient(pod.Namespace, pod.Spec.ServiceAccountName, pod.Name, pod.UID)
	review, err := agent.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, authenticationv1.ExtraValue{own}, review.Status.UserInfo.Extra["authentication.kubernetes.io/node-name"])
}

// waitDaemonSetDeleted waits for the DaemonSet controller's SuccessfulDelete event of every
// pod.
func waitDaemonSetDeleted(t *testing.T, fw *framework.Framework, pods []string) {
	t.Helper()
	missing := pods
	err := framework.Poll(t, func(ctx context.Context) (bool, error) {
		events, err := fw.Client().CoreV1().Events(framework.Namespace).List(ctx, metav1.ListOptions{
			FieldSelector: fields.Set{
				"involvedObject.kind": "DaemonSet",
				"involvedObject.name": framework.DaemonSetName,
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
