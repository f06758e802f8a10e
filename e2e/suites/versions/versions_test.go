package versions

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	resourcev1beta1 "k8s.io/api/resource/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/nodeready/nodeready/e2e/framework/controlplane"
	"github.com/nodeready/nodeready/e2e/framework/harness"
	"github.com/nodeready/nodeready/nodepatch"
)

// release is one Kubernetes release of the matrix and what nodeready offers on it.
type release struct {
	version string
	binDir  string
	// creationPolicy: manifests/node-creation/ and manifests/label-to-taint/ install
	// (MutatingAdmissionPolicy v1 is served).
	creationPolicy bool
	// dra: resource.k8s.io/v1 is served with no flags (Kubernetes 1.34+).
	dra bool
}

func matrix(t *testing.T) []release {
	t.Helper()
	current, err := controlplane.DefaultBinDir()
	require.NoError(t, err)
	floor, err := controlplane.BinDirFor(controlplane.FloorKubernetesVersion)
	require.NoError(t, err)
	newest, err := controlplane.BinDirFor(controlplane.NewestKubernetesVersion)
	require.NoError(t, err)
	return []release{
		{version: controlplane.NewestKubernetesVersion, binDir: newest, creationPolicy: true, dra: true},
		{version: controlplane.KubernetesVersion, binDir: current, creationPolicy: true, dra: true},
		{version: controlplane.FloorKubernetesVersion, binDir: floor, creationPolicy: false, dra: false},
	}
}

// outcome is one scenario's result on one release, for the summary.
type outcome struct {
	version, scenario string
	passed            bool
	took              time.Duration
}

// TestVersionMatrix runs the core scenarios on a control plane of each release of the matrix,
// one release after the other, and logs a table of the outcomes.
func TestVersionMatrix(t *testing.T) {
	var outcomes []outcome
	t.Cleanup(func() { t.Log("version matrix:\n" + summary(outcomes)) })
	for _, r := range matrix(t) {
		t.Run(r.version, func(t *testing.T) {
			scenario := func(name string, fn func(t *testing.T)) {
				start := time.Now()
				passed := t.Run(name, fn)
				outcomes = append(outcomes, outcome{r.version, name, passed, time.Since(start)})
			}
			start := time.Now()
			c := harness.StartForTest(t, harness.Options{ControlPlane: controlplane.Options{BinDir: r.binDir}})
			outcomes = append(outcomes, outcome{r.version, "control plane started, manifests/ installed", true, time.Since(start)})
			require.Equal(t, r.version, c.KubernetesVersion(), "the API server's version")

			f := harness.NewFleetForTest(t, c, "core")
			var node string
			scenario("verifies a new tainted node", func(t *testing.T) { node = testVerify(t, c, f, r) })
			scenario("re-verifies once the label is removed", func(t *testing.T) { testReverify(t, c, f, node) })
			scenario("the own-node policy refuses a write to another node", func(t *testing.T) { testOwnNode(t, c) })
			scenario("a bad setting stops the agent, the node stays tainted", func(t *testing.T) { testBadSetting(t, c) })
			scenario("replace-node deletes a node that fails its checks", func(t *testing.T) { testReplaceNode(t, c) })
			scenario("the creation-time taint policy", func(t *testing.T) { testCreationPolicy(t, c, r) })
			scenario("the dra gate", func(t *testing.T) { testDRAGate(t, c, r) })
		})
	}
}

// testVerify: a new node with the startup taint gets the label and loses the taint in one
// write, and its agent exits 0 on the SIGTERM of the DaemonSet controller's deletion. The
// node reports the control plane's version as its kubelet's.
func testVerify(t *testing.T, c *harness.Cluster, f *harness.Fleet, r release) string {
	nodes, err := f.AddNodes(t.Context(), 1, harness.NodeOptions{})
	require.NoError(t, err)
	node := nodes[0]
	require.NoError(t, f.WaitReleased(t.Context(), node))
	require.NoError(t, f.WaitAgentsGone(t.Context(), node))

	assert.Equal(t, r.version, harness.RequireNode(t, c, node).Status.NodeInfo.KubeletVersion)
	assertAgentsEndedWell(t, f, node, 1)
	require.NoError(t, f.History().WaitLatest(t.Context(), node, harness.Released))
	assert.Equal(t, []harness.NodeState{harness.Unverified, harness.Released}, f.History().States(node))
	return node
}

// testReverify: removing the verified label brings a new agent, which labels the node again.
func testReverify(t *testing.T, c *harness.Cluster, f *harness.Fleet, node string) {
	require.NotEmpty(t, node, "no verified node to re-verify")
	_, err := c.Kubectl(t.Context(), "label", "node", node, harness.VerifiedLabel+"-")
	require.NoError(t, err)

	err = harness.Poll(t, func(context.Context) (bool, error) {
		pods := f.PodsOn(node)
		return len(pods) == 2 && pods[0].Done && pods[1].Done, nil
	})
	require.NoError(t, err, "no second agent pod on %s ran to the end", node)
	require.NoError(t, f.WaitReleased(t.Context(), node))
	assertAgentsEndedWell(t, f, node, 2)
	require.NoError(t, f.History().WaitLatest(t.Context(), node, harness.Released))
	assert.Equal(t, []harness.NodeState{harness.Unverified, harness.Released, harness.Unlabelled, harness.Released},
		f.History().States(node))
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
		logs = agentLogs(t, f)
		return strings.Contains(logs, want) && strings.Contains(logs, "nodeready: Event refused"), nil
	})
	require.NoError(t, err, "the agent never logged both refusals; its log:\n%s", logs)
	harness.RequireNoNodeEvent(t, c, other, "ReleaseFailed")
	for _, n := range []string{other, own} {
		node := harness.RequireNode(t, c, n)
		assert.NotContains(t, node.Labels, harness.VerifiedLabel, "label on %s", n)
		assert.True(t, hasStartupTaint(node), "startup taint gone from %s", n)
	}

	// What the API server makes of a token bound to that agent pod, as the kubelet's is.
	pods, err := f.AgentPods(t.Context(), own)
	require.NoError(t, err)
	require.Len(t, pods, 1)
	pod := pods[0]
	tr, err := c.Client().CoreV1().ServiceAccounts(pod.Namespace).CreateToken(t.Context(), pod.Spec.ServiceAccountName,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: ptr.To[int64](600),
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		}}, metav1.CreateOptions{})
	require.NoError(t, err)
	cp := c.ControlPlane()
	agent, err := kubernetes.NewForConfig(&rest.Config{Host: cp.APIServerURL(), BearerToken: tr.Status.Token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: cp.CAFile()}})
	require.NoError(t, err)
	review, err := agent.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, authenticationv1.ExtraValue{own}, review.Status.UserInfo.Extra["authentication.kubernetes.io/node-name"])
}

// testBadSetting: an invalid value in nodeready-config stops every agent at start, exit code
// 2, with a message naming the variable and the value; the node stays tainted and unlabelled.
// Once the ConfigMap is fixed, the next restart of the same pod releases the node.
func testBadSetting(t *testing.T, c *harness.Cluster) {
	require.NoError(t, c.ApplyConfig(t.Context(), map[string]string{"MAX_RETRIES": "many"}))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.ApplyConfig(ctx, nil); err != nil {
			t.Errorf("restore config: %v", err)
		}
	})
	f := harness.NewFleetForTest(t, c, "badsetting")
	nodes, err := f.AddNodes(t.Context(), 1, harness.NodeOptions{})
	require.NoError(t, err)
	node := nodes[0]

	var pod corev1.Pod
	err = harness.Poll(t, func(ctx context.Context) (bool, error) {
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
	assert.NotContains(t, n.Labels, harness.VerifiedLabel)
	assert.True(t, hasStartupTaint(n), "startup taint gone")

	require.NoError(t, c.ApplyConfig(t.Context(), nil))
	require.NoError(t, f.WaitReleased(t.Context(), node))
	require.NoError(t, f.History().WaitLatest(t.Context(), node, harness.Released))
	assert.Equal(t, []harness.NodeState{harness.Unverified, harness.Released}, f.History().States(node))
}

// testReplaceNode: with manifests/replace-node/ applied (its RBAC, and the policy that lets
// an agent delete only its own node), an agent whose checks fail with FAILURE_ACTION=
// replace-node deletes its Node, which has no NodeClaim.
func testReplaceNode(t *testing.T, c *harness.Cluster) {
	out, err := c.Kubectl(t.Context(), "apply", "-f", filepath.Join(c.RepoRoot(), "manifests", "replace-node"))
	require.NoError(t, err)
	t.Logf("kubectl apply -f manifests/replace-node/:\n%s", out)
	f := harness.NewFleetForTest(t, c, "replace")
	node := f.Name() + "-failing"
	require.NoError(t, f.AddNode(t.Context(), node, harness.NodeOptions{BrokenDNS: true,
		Env: map[string]string{"FAILURE_ACTION": "replace-node", "MAX_RETRIES": "1"}}))

	err = harness.Poll(t, func(ctx context.Context) (bool, error) {
		_, err := c.Client().CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	require.NoError(t, err, "the failing node %s was not deleted", node)
	ev := harness.RequireNodeEvent(t, c, node, "ReplacingNode")
	assert.Contains(t, ev.Note, "Deleted Node "+node+" because checks failed: dns ")
}

// testCreationPolicy: where MutatingAdmissionPolicy v1 is served, manifests/node-creation/
// startup-taint.yaml installs and a new Linux node is created with the startup taint, and
// manifests/label-to-taint/ is accepted; where it is not, kubectl refuses both for their
// kind, and nothing else changes.
func testCreationPolicy(t *testing.T, c *harness.Cluster, r release) {
	// manifests/label-to-taint/ needs the same kind: a server-side dry run holds it to
	// what the API server accepts, policy expressions included, and stores nothing.
	labelToTaint := filepath.Join(c.RepoRoot(), "manifests", "label-to-taint")
	out, err := c.Kubectl(t.Context(), "apply", "--dry-run=server", "-f", labelToTaint)
	if !r.creationPolicy {
		require.Error(t, err, "kubectl apply of %s: %s", labelToTaint, out)
		assert.Contains(t, out, `no matches for kind "MutatingAdmissionPolicy" in version "admissionregistration.k8s.io/v1"`)
	} else {
		require.NoError(t, err, "kubectl apply of %s: %s", labelToTaint, out)
	}

	file := filepath.Join(c.RepoRoot(), "manifests", "node-creation", "startup-taint.yaml")
	out, err = c.Kubectl(t.Context(), "apply", "-f", file)
	if !r.creationPolicy {
		require.Error(t, err, "kubectl apply of %s: %s", file, out)
		assert.Contains(t, out, `no matches for kind "MutatingAdmissionPolicy" in version "admissionregistration.k8s.io/v1"`)
		return
	}
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if out, err := c.Kubectl(ctx, "delete", "-f", file); err != nil {
			t.Errorf("remove %s: %v: %s", file, err, out)
		}
	})
	// The policy loads asynchronously: dry-run creates until one comes back tainted.
	canary := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "creation-policy-canary",
		Labels: map[string]string{corev1.LabelOSStable: "linux"}}}
	err = harness.Poll(t, func(ctx context.Context) (bool, error) {
		n, err := c.Client().CoreV1().Nodes().Create(ctx, canary, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && hasStartupTaint(n), nil
	})
	require.NoError(t, err, "a new node was never created with the startup taint")
}

func hasStartupTaint(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&harness.StartupTaint) })
}

// assertAgentsEndedWell asserts that the node ran exactly pods agent pods, each once (no
// restarts), each ending with exit code 0 on the kubelet's SIGTERM.
func assertAgentsEndedWell(t *testing.T, f *harness.Fleet, node string, pods int) {
	t.Helper()
	on := f.PodsOn(node)
	require.Len(t, on, pods, "agent pods on %s", node)
	for _, p := range on {
		assert.Zero(t, p.Restarts, "restarts of %s", p.Name)
		if assert.Len(t, p.Exits, 1, "exits of %s", p.Name) {
			assert.Equal(t, 0, p.Exits[0].Code, "exit code of %s", p.Name)
			assert.True(t, p.Exits[0].Signaled, "%s ended on its own, not on the kubelet's SIGTERM", p.Name)
		}
	}
}

// summary renders the outcomes as a table, one row per release and scenario.
func summary(outcomes []outcome) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "KUBERNETES\tSCENARIO\tRESULT\tTOOK")
	for _, o := range outcomes {
		result := "pass"
		if !o.passed {
			result = "FAIL"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", o.version, o.scenario, result, o.took.Round(100*time.Millisecond))
	}
	w.Flush()
	return b.String()
}

// draDriver is a stand-in DRA driver whose ResourceSlices the tests write.
const draDriver = "gpu.nodeready.example"

// testDRAGate: where resource.k8s.io/v1 is served, a node with the dra gate is released once
// its driver's slice is published; where no version is, the node is held and its condition
// says why in one message.
func testDRAGate(t *testing.T, c *harness.Cluster, r release) {
	f, node := draNode(t, c, "dra", draDriver+">=1")
	if !r.dra {
		cond := harness.RequireAgentCondition(t, c, node, nodepatch.ReasonChecksFailed)
		assert.Contains(t, cond.Message, "the API server serves no resource.k8s.io version nodeready reads (v1, v1beta1)")
		n := harness.RequireNode(t, c, node)
		assert.True(t, harness.IsTainted(n), "held")
		return
	}
	_, err := c.Client().ResourceV1().ResourceSlices().Create(t.Context(), &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node},
		Spec: resourcev1.ResourceSliceSpec{Driver: draDriver, NodeName: ptr.To(node),
			Pool:    resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			Devices: []resourcev1.Device{{Name: "gpu-0"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, f.WaitReleased(t.Context(), node))
}

// draNode installs the dra gate's RBAC and adds a node of a new fleet whose agent runs the
// gate with DRA_DEVICES=devices.
func draNode(t *testing.T, c *harness.Cluster, fleet, devices string) (*harness.Fleet, string) {
	t.Helper()
	out, err := c.Kubectl(t.Context(), "apply", "-f", filepath.Join(c.RepoRoot(), "manifests", "gates", "dra.yaml"))
	require.NoError(t, err, out)
	f := harness.NewFleetForTest(t, c, fleet)
	node := f.Name() + "-0"
	require.NoError(t, f.AddNode(t.Context(), node, harness.NodeOptions{Env: map[string]string{
		"CHECKS": "dns,tcp,apiserver,endpoints,dra", "DRA_DEVICES": devices, "MAX_RETRIES": "1"}}))
	return f, node
}

// TestDRAGateOnV1beta1: Kubernetes 1.32 with Dynamic Resource Allocation turned on serves
// resource.k8s.io/v1beta1 only; the dra gate reads it there.
func TestDRAGateOnV1beta1(t *testing.T) {
	floor, err := controlplane.BinDirFor(controlplane.FloorKubernetesVersion)
	require.NoError(t, err)
	c := harness.StartForTest(t, harness.Options{ControlPlane: controlplane.Options{BinDir: floor, APIServerArgs: []string{
		"--feature-gates=DynamicResourceAllocation=true", "--runtime-config=resource.k8s.io/v1beta1=true"}}})
	f, node := draNode(t, c, "drabeta", draDriver+"[productName=Example GPU]>=1")
	cond := harness.RequireAgentCondition(t, c, node, nodepatch.ReasonChecksFailed)
	assert.Contains(t, cond.Message, "no ResourceSlice for node "+node)

	_, err = c.Client().ResourceV1beta1().ResourceSlices().Create(t.Context(), &resourcev1beta1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node},
		Spec: resourcev1beta1.ResourceSliceSpec{Driver: draDriver, NodeName: node,
			Pool: resourcev1beta1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			Devices: []resourcev1beta1.Device{{Name: "gpu-0", Basic: &resourcev1beta1.BasicDevice{
				Attributes: map[resourcev1beta1.QualifiedName]resourcev1beta1.DeviceAttribute{"productName": {StringValue: ptr.To("Example GPU")}}}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, f.WaitReleased(t.Context(), node))
}

// agentLogs reads the logs the fleet's kubelet kept of its agent processes.
func agentLogs(t *testing.T, f *harness.Fleet) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(f.LogDir(), harness.Namespace+"_nodeready-*.log"))
	require.NoError(t, err)
	var b strings.Builder
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err == nil {
			b.Write(data)
		}
	}
	return b.String()
}
