package reliability

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeready/nodeready/checks/dnstest"
	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/kubelet"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// maxRetries is the agents' MAX_RETRIES, the shipped default: after that many failing
// rounds the failure is recorded and the rounds go on every RETRY_BACKOFF_MAX.
const (
	maxRetries      = 5
	retryBackoffMax = time.Second // the harness's RETRY_BACKOFF_MAX
)

// failingAgent is an agent whose release the test makes fail, and what it did meanwhile.
type failingAgent struct {
	f     *fleet
	node  string
	dns   *dnstest.Server
	agent kubelet.PodInfo
}

// startFailing adds a node whose agent waits in its checks (its DNS answers are held), so
// the test can take something away before the agent tries to release the node.
func startFailing(t *testing.T, f *fleet, name string) *failingAgent {
	t.Helper()
	a := &failingAgent{f: f, node: name, dns: newSlowDNS(t, 0)}
	a.dns.Hold()
	require.NoError(t, f.addSlowNode(t.Context(), name, a.dns, framework.NodeOptions{}))
	require.NoError(t, waitQuery(t.Context(), a.dns, 0))
	var err error
	a.agent, err = f.waitRunning(t.Context(), name, nil)
	require.NoError(t, err)
	return a
}

// failedRounds lets the checks pass and waits until the agent has failed to release the
// node in n more rounds than the recorded failure's (its metric of release errors), then
// returns the agent's rounds per second and the API requests it made in those rounds.
func (a *failingAgent) failedRounds(t *testing.T, e env, n int) (roundsPerSecond float64, requests requestCounts) {
	t.Helper()
	ctx := t.Context()
	a.dns.Open()
	// First the rounds that count toward the failure; then the capped rounds, measured.
	a.waitMetric(t, `nodeready_node_patches_total{result="error"}`, maxRetries)
	from := e.audit.offset(t)
	r0, began := a.metric(t, "nodeready_rounds_total"), time.Now()
	a.waitMetric(t, `nodeready_node_patches_total{result="error"}`, float64(maxRetries+n))
	r1, took := a.metric(t, "nodeready_rounds_total"), time.Since(began)
	requests = countRequests(e.audit.since(t, from, a.node))
	p, ok := a.f.Kubelet().Pod(a.agent.UID)
	require.True(t, ok && p.Running, "agent on %s stopped running", a.node)
	assert.Zero(t, p.Restarts, "agent on %s restarted", a.node)
	assert.Zero(t, podRestarts(t, ctx, a.f.client, a.agent), "restartCount of %s", a.agent.Name)
	return (r1 - r0) / took.Seconds(), requests
}

func (a *failingAgent) metric(t *testing.T, name string) float64 {
	t.Helper()
	p, _ := a.f.Kubelet().Pod(a.agent.UID)
	s, err := scrapeAgent(t.Context(), p.MetricsAddr)
	require.NoError(t, err)
	return s[name]
}

func (a *failingAgent) waitMetric(t *testing.T, name string, min float64) {
	t.Helper()
	require.NoError(t, a.f.WaitMetric(t.Context(), a.agent, name, min), "agent on %s", a.node)
}

// podRestarts returns the restartCount the kubelet reported for the pod's container.
func podRestarts(t *testing.T, ctx context.Context, client kubernetes.Interface, pod kubelet.PodInfo) int32 {
	t.Helper()
	p, err := client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, p.Status.ContainerStatuses, 1)
	return p.Status.ContainerStatuses[0].RestartCount
}

// assertBounded asserts that a failing agent, after its recorded failure, runs no more than
// one round per RETRY_BACKOFF_MAX (with the backoff's jitter) and makes a bounded number of
// API requests per round: at most 8. A refused release's round is its checks' (GET /readyz,
// LIST endpointslices), its condition and its label sent at once (PATCH nodes/status, PATCH
// nodes), the read of the node and the condition taken back (GET nodes, PATCH nodes/status);
// the label's write once more when it reached the API server before its condition (its test
// of the condition refuses it, 422) and the take-back once more when, fenced by the node's
// resourceVersion, it lost to a status update of the kubelet's in between.
func assertBounded(t *testing.T, what string, roundsPerSecond float64, requests requestCounts, rounds int) {
	t.Helper()
	assert.LessOrEqual(t, roundsPerSecond, 1.2/retryBackoffMax.Seconds(), "%s: rounds per second", what)
	assert.LessOrEqual(t, requests.total(), float64(8*rounds), "%s: API requests in %d rounds: %v", what, rounds, requests)
}

// TestNodeDeleted: the node is deleted while its agent runs. The agent's release finds no
// node (404); it says so in a ReleaseFailed Event (a release that fails is never a failed
// check) and goes on at its capped backoff, without restarting and without a burst of
// requests.
func TestNodeDeleted(t *testing.T) {
	const rounds = 5
	e := setup(t)
	f := e.fleet(t, "deleted")
	ctx := t.Context()
	a := startFailing(t, f, "deleted-0")

	require.NoError(t, f.client.CoreV1().Nodes().Delete(ctx, a.node, metav1.DeleteOptions{}))
	rate, requests := a.failedRounds(t, e, rounds)
	assertBounded(t, "node deleted", rate, requests, rounds)
	assert.Equal(t, float64(1), a.metric(t, "nodeready_verification_failures_total"), "failure recorded once")
	assertEventSays(t, ctx, f.client, a.node, "ReleaseFailed", "node not found")
	t.Logf("node deleted under its agent: the agent kept running (no restart), %.2f rounds/s after its recorded failure, %.0f API requests in %d rounds: %s",
		rate, requests.total(), rounds, formatCounts(requests))
}

// TestForbidden takes the agent's permission away twice, once in RBAC (its
// ClusterRoleBinding deleted: the read of the node is refused) and once in the admission
// policy (the policy's verified label changed under the running agent, as an operator who
// changed VERIFIED_LABEL in one place only would: its write of the label it knows is
// refused). Each time
// the agent says so in a ReleaseFailed Event (a misconfiguration, never a failed check) and
// the condition Misconfigured, keeps the node as it was, goes on at its capped
// backoff without restarting, and releases the node once the permission is back.
func TestForbidden(t *testing.T) {
	const rounds = 4
	e := setup(t)
	f := e.fleet(t, "forbidden")
	ctx := t.Context()
	rbacFile := filepath.Join(e.fw.RepoRoot(), "manifests", "01-rbac.yaml")
	policyFile := filepath.Join(e.fw.RepoRoot(), "manifests", "04-admission-policy.yaml")

	// The permissions come back also when the test fails half way: the cluster is shared.
	cases := []struct {
		name    string
		take    func(t *testing.T)
		inForce func(ctx context.Context, agent kubernetes.Interface, node string) bool
		restore func(ctx context.Context) error
	}{{
		name: "rbac",
		take: func(t *testing.T) {
			require.NoError(t, f.client.RbacV1().ClusterRoleBindings().Delete(ctx, "nodeready", metav1.DeleteOptions{}))
		},
		inForce: func(ctx context.Context, agent kubernetes.Interface, node string) bool {
			_, err := agent.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			return apierrors.IsForbidden(err)
		},
		restore: func(ctx context.Context) error {
			_, err := e.fw.KubectlContext(ctx, "apply", "-f", rbacFile)
			return err
		},
	}, {
		name: "policy",
		take: func(t *testing.T) {
			data, err := os.ReadFile(policyFile)
			require.NoError(t, err)
			changed := strings.Replace(string(data), `"'node-ready/verified'"`, `"'example.com/verified'"`, 1)
			require.NotEqual(t, string(data), changed, "the policy names the verified label")
			path := filepath.Join(t.TempDir(), "policy.yaml")
			require.NoError(t, os.WriteFile(path, []byte(changed), 0o644))
			_, err = e.fw.KubectlContext(ctx, "apply", "-f", path)
			require.NoError(t, err)
		},
		inForce: func(ctx context.Context, agent kubernetes.Interface, node string) bool {
			_, err := agent.CoreV1().Nodes().Patch(ctx, node, types.JSONPatchType,
				[]byte(`[{"op":"add","path":"/metadata/labels/node-ready~1verified","value":"true"}]`),
				metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: wellknown.FieldManager})
			return apierrors.IsForbidden(err)
		},
		restore: func(ctx context.Context) error {
			_, err := e.fw.KubectlContext(ctx, "apply", "-f", policyFile)
			return err
		},
	}}
	var lines []string
	for i, tc := range cases {
		a := startFailing(t, f, fmt.Sprintf("forbidden-%d", i))
		agent := agentClient(t, e.fw, a.agent)
		restored := false
		t.Cleanup(func() {
			if restored {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := tc.restore(ctx); err != nil {
				t.Errorf("%s: restore the permission: %v", tc.name, err)
			}
		})
		tc.take(t)
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, framework.WaitTimeout, true, func(ctx context.Context) (bool, error) {
			return tc.inForce(ctx, agent, a.node), nil
		})
		require.NoError(t, err, "%s: the permission was not taken away", tc.name)

		rate, requests := a.failedRounds(t, e, rounds)
		assertBounded(t, tc.name, rate, requests, rounds)
		assertEventSays(t, ctx, f.client, a.node, "ReleaseFailed", "forbidden: check the ClusterRole and the admission policy")
		if tc.name == "policy" { // without its binding, the agent cannot write its condition either
			cond := e.fw.For(t).WaitCondition(a.node, string(wellknown.Misconfigured))
			assert.Contains(t, cond.Message, "release: ")
		}
		for _, v := range f.versions.of(a.node) {
			require.True(t, v.tainted() && !v.labelled(), "node %s changed while the agent was refused: %s", a.node, v)
		}

		require.NoError(t, tc.restore(ctx))
		restored = true
		back := time.Now()
		require.NoError(t, f.WaitReleased(ctx, a.node))
		took := time.Since(back)
		require.NoError(t, f.waitAgentsDone(ctx, a.node, 1))
		pods := f.PodsOn(a.node)
		require.Len(t, pods, 1)
		assert.Equal(t, a.agent.UID, pods[0].UID, "released by the agent that was refused")
		f.assertStates(t, []framework.NodeState{framework.Unverified, framework.Released}, a.node)
		f.assertExits(t, a.node)
		lines = append(lines, fmt.Sprintf("%s: refused, %.2f rounds/s after the recorded failure, %.0f API requests in %d rounds (%s); released %s after the fix by the same agent, no restart",
			tc.name, rate, requests.total(), rounds, formatCounts(requests), took.Round(100*time.Millisecond)))
	}
	t.Logf("403 from RBAC and from the admission policy:\n  %s", strings.Join(lines, "\n  "))
}

// TestSlowDNS: a nameserver that answers just before CHECK_TIMEOUT (5s) lets the check pass
// in the first round; one that answers just after it fails the round, without the agent
// hanging, and once it answers in time the node is released.
func TestSlowDNS(t *testing.T) {
	const checkTimeout = 5 * time.Second // the harness's CHECK_TIMEOUT
	e := setup(t)
	f := e.fleet(t, "slowdns")
	ctx := t.Context()
	justBefore, justAfter := newSlowDNS(t, checkTimeout*9/10), newSlowDNS(t, checkTimeout*11/10)
	require.NoError(t, f.addSlowNode(ctx, "slowdns-before", justBefore, framework.NodeOptions{}))
	require.NoError(t, f.addSlowNode(ctx, "slowdns-after", justAfter, framework.NodeOptions{}))

	before, err := f.waitRunning(ctx, "slowdns-before", nil)
	require.NoError(t, err)
	v, err := f.versions.waitFor(ctx, "slowdns-before", framework.WaitTimeout, "released", nodeVersion.released)
	require.NoError(t, err)
	tookBefore := v.At.Sub(before.Started)
	assert.GreaterOrEqual(t, tookBefore, checkTimeout*9/10, "released before the DNS answer")
	queries, _ := justBefore.Queries()
	assert.LessOrEqual(t, queries, int64(2), "the first round's A and AAAA queries were enough")

	after, err := f.waitRunning(ctx, "slowdns-after", nil)
	require.NoError(t, err)
	// Two rounds timed out: the agent asked again, and the node is still tainted.
	require.NoError(t, waitQuery(ctx, justAfter, 4))
	latest, _ := f.versions.latest("slowdns-after")
	assert.True(t, latest.tainted() && !latest.labelled(), "node with a DNS slower than CHECK_TIMEOUT: %s", latest)
	justAfter.SetDelay(0)
	require.NoError(t, f.WaitReleased(ctx, "slowdns-before", "slowdns-after"))
	for _, n := range []string{"slowdns-before", "slowdns-after"} {
		require.NoError(t, f.waitAgentsDone(ctx, n, 1))
	}
	assert.Len(t, f.PodsOn("slowdns-after"), 1)
	assert.Equal(t, after.UID, f.PodsOn("slowdns-after")[0].UID, "released by the agent whose checks timed out")
	f.assertStates(t, []framework.NodeState{framework.Unverified, framework.Released}, "slowdns-before", "slowdns-after")
	exits := f.assertExits(t, "slowdns-before", "slowdns-after")
	assert.Empty(t, nodeEvents(t, ctx, f.client, []string{"slowdns-before"}, failureReasons...))
	t.Logf("DNS answering after %s (CHECK_TIMEOUT %s): released %s after the agent started, in its first round; DNS answering after %s: the rounds timed out, the agent asked again and released the node once DNS answered in time; %d agents exit 0",
		checkTimeout*9/10, checkTimeout, tookBefore.Round(100*time.Millisecond), checkTimeout*11/10, exits)
}

// agentClient returns a client that acts as the agent of the pod: the nodeready
// ServiceAccount's token bound to the pod, as the kubelet gives it.
func agentClient(t *testing.T, fw *framework.Framework, pod kubelet.PodInfo) kubernetes.Interface {
	t.Helper()
	return fw.For(t).TokenClient(framework.Namespace, "nodeready", pod.Name, pod.UID)
}

// assertEventSays asserts that an agent Event about the node with the reason says what.
func assertEventSays(t *testing.T, ctx context.Context, client kubernetes.Interface, node, reason, what string) {
	t.Helper()
	var notes []string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, framework.WaitTimeout, true, func(ctx context.Context) (bool, error) {
		notes = notes[:0]
		for _, ev := range nodeEvents(t, ctx, client, []string{node}, reason) {
			notes = append(notes, ev.Note)
			if strings.Contains(ev.Note, what) {
				return true, nil
			}
		}
		return false, nil
	})
	assert.NoError(t, err, "no %s Event about %s saying %q; notes: %q", reason, node, what, notes)
}

func formatCounts(c requestCounts) string {
	var parts []string
	for k, v := range c {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, v))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}
