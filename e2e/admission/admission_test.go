// Package admission proves on a real API server that the optional
// MutatingAdmissionPolicies in manifests/node-creation/ put the taint on new
// nodes, and only on the nodes they select. Every manifest is applied with
// kubectl as shipped, and every assertion reads the Node back from the API.
package admission

import (
	"context"
	"encoding/json"
	"maps"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/nodeready/nodeready/e2e/controlplane"
)

var (
	startupTaint      = corev1.Taint{Key: "node-ready/unverified", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	dedicatedTaint    = corev1.Taint{Key: "example.com/dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}
	gpuTaint          = corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoExecute}
	controlPlaneTaint = corev1.Taint{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}
	// The startup taint's key and effect with another value: for the API
	// server the same taint, so it must not be added a second time.
	otherValueTaint = corev1.Taint{Key: "node-ready/unverified", Value: "registered", Effect: corev1.TaintEffectNoSchedule}
)

const taintOnCreateLabel = "node-ready/taint-on-create"

// nodeCase is a Node created through the API and the taints it must have.
type nodeCase struct {
	name   string
	node   string
	labels map[string]string
	taints []corev1.Taint
	want   []corev1.Taint
}

func TestStartupTaintPolicy(t *testing.T) {
	cp := controlplane.StartForTest(t)
	admin := cp.Client()
	requireMutatingAdmissionPolicyV1(t, admin)

	t.Run("the default install leaves the policies out", func(t *testing.T) {
		out := kubectl(t, cp, "apply", "-f", filepath.Join("..", "..", "manifests"), "--dry-run=client", "-o", "name")
		assert.Contains(t, out, "daemonset.apps/nodeready")
		assert.NotContains(t, strings.ToLower(out), "mutatingadmissionpolicy")
	})

	install(t, cp, "startup-taint.yaml", nil)

	cases := []nodeCase{
		{name: "a worker node gets the startup taint", node: "worker",
			labels: map[string]string{"example.com/pool": "workers"},
			want:   []corev1.Taint{startupTaint}},
		{name: "a node of an AKS user pool gets the startup taint", node: "aks-user",
			labels: map[string]string{"kubernetes.azure.com/mode": "user"},
			want:   []corev1.Taint{startupTaint}},
		{name: "a node registered with the startup taint has it once", node: "registered",
			taints: []corev1.Taint{startupTaint},
			want:   []corev1.Taint{startupTaint}},
		{name: "a node registered with the startup taint's key and effect keeps its value", node: "other-value",
			taints: []corev1.Taint{otherValueTaint},
			want:   []corev1.Taint{otherValueTaint}},
		{name: "a node registered with other taints keeps them and gains the startup taint", node: "tainted",
			taints: []corev1.Taint{dedicatedTaint, gpuTaint},
			want:   []corev1.Taint{dedicatedTaint, gpuTaint, startupTaint}},
		{name: "a control-plane node has none", node: "control-plane",
			labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}},
		{name: "a legacy master node has none", node: "master",
			labels: map[string]string{"node-role.kubernetes.io/master": ""}},
		{name: "a control-plane node registered with its taint keeps only that", node: "control-plane-tainted",
			taints: []corev1.Taint{controlPlaneTaint},
			want:   []corev1.Taint{controlPlaneTaint}},
		{name: "a node of an AKS system pool has none", node: "aks-system",
			labels: map[string]string{"kubernetes.azure.com/mode": "system"}},
		{name: "a node with the opt-out label has none", node: "opted-out",
			labels: map[string]string{"node-ready/skip-startup-taint": "true"}},
		{name: "a node created already verified has none", node: "verified",
			labels: map[string]string{"node-ready/verified": "true"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { checkNode(t, admin, tc) })
	}

	t.Run("the check in manifests/node-creation/README.md shows the taint", func(t *testing.T) {
		out := kubectlWithInput(t, cp, "apiVersion: v1\nkind: Node\nmetadata:\n  name: policy-check\n  labels:\n    kubernetes.io/os: linux\n",
			"create", "--dry-run=server", "-o", `jsonpath={.spec.taints}{"\n"}`, "-f", "-")
		assert.Contains(t, out, `"key":"node-ready/unverified"`)
		_, err := admin.CoreV1().Nodes().Get(t.Context(), "policy-check", metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "the dry run stored the node: %v", err)
	})

	t.Run("kubelets registering their own nodes", func(t *testing.T) {
		// As the kubelet: system:node:<name> in system:nodes, through the Node
		// authorizer and NodeRestriction (on in this control plane).
		worker := clientAs(t, cp, "system:node:kubelet-worker", "system:nodes")
		createNode(t, worker, "kubelet-worker", linux(map[string]string{"kubernetes.io/hostname": "kubelet-worker"}), nil)
		assert.Equal(t, []corev1.Taint{startupTaint}, ownTaints(getNode(t, admin, "kubelet-worker")),
			"a kubelet's new node gets the startup taint")

		// NodeRestriction refuses a kubelet the control-plane label, so a
		// kubelet-registered control plane (kubeadm) is excluded by the
		// opt-out label, --node-labels=node-ready/skip-startup-taint=true.
		cpKubelet := clientAs(t, cp, "system:node:kubelet-control-plane", "system:nodes")
		_, err := cpKubelet.CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: "kubelet-control-plane", Labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}}}, metav1.CreateOptions{})
		require.True(t, apierrors.IsForbidden(err), "NodeRestriction must refuse the control-plane label: %v", err)
		createNode(t, cpKubelet, "kubelet-control-plane", linux(map[string]string{
			"kubernetes.io/hostname": "kubelet-control-plane", "node-ready/skip-startup-taint": "true"}), nil)
		assert.Empty(t, ownTaints(getNode(t, admin, "kubelet-control-plane")),
			"a kubelet's node with the opt-out label gets no taint")
	})

	t.Run("the agent's release is not undone", func(t *testing.T) {
		const name = "released"
		createNode(t, admin, name, linux(map[string]string{"kubernetes.io/hostname": name}), []corev1.Taint{dedicatedTaint})
		require.Equal(t, []corev1.Taint{dedicatedTaint, startupTaint}, ownTaints(getNode(t, admin, name)))

		// The release as the agent sends it (README, "How the node is released"):
		// one JSON Patch, an UPDATE, that tests the taints as read, replaces them
		// without the startup taint and adds the verified label. Like the agent,
		// read again and retry when the test fails (422): kube-controller-manager
		// may write the taints of a new node at the same moment.
		err := retry.OnError(retry.DefaultBackoff, apierrors.IsInvalid, func() error {
			taints := getNode(t, admin, name).Spec.Taints
			release := `[{"op":"test","path":"/spec/taints","value":` + taintsJSON(t, taints) + `},` +
				`{"op":"replace","path":"/spec/taints","value":` + taintsJSON(t, withoutStartupTaint(taints)) + `},` +
				`{"op":"add","path":"/metadata/labels/node-ready~1verified","value":"true"}]`
			_, err := admin.CoreV1().Nodes().Patch(t.Context(), name, types.JSONPatchType, []byte(release), metav1.PatchOptions{})
			return err
		})
		require.NoError(t, err)
		n := getNode(t, admin, name)
		assert.Equal(t, []corev1.Taint{dedicatedTaint}, ownTaints(n))
		assert.Equal(t, "true", n.Labels["node-ready/verified"])

		// Any later update leaves the node untainted too.
		_, err = admin.CoreV1().Nodes().Patch(t.Context(), name, types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"example.com/pool":"workers"}}}`), metav1.PatchOptions{})
		require.NoError(t, err)
		assert.Equal(t, []corev1.Taint{dedicatedTaint}, ownTaints(getNode(t, admin, name)))
	})
}

// TestLabelToTaintPolicy runs on an API server without the
// TaintNodesByCondition admission plugin, which otherwise gives every new
// node the not-ready taint before the policies run: here a node can be
// created without any taint, the case in which the policies must create the
// taint list rather than append to it.
func TestLabelToTaintPolicy(t *testing.T) {
	cp := controlplane.StartForTestWith(t, controlplane.Options{
		APIServerArgs: []string{"--disable-admission-plugins=TaintNodesByCondition"},
	})
	admin := cp.Client()
	requireMutatingAdmissionPolicyV1(t, admin)
	plain, err := admin.CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "plain"}},
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	require.NoError(t, err)
	require.Nil(t, plain.Spec.Taints, "without TaintNodesByCondition a new node has no taint list")

	install(t, cp, "label-to-taint.yaml", map[string]string{taintOnCreateLabel: "true"})

	labelled := map[string]string{taintOnCreateLabel: "true"}
	cases := []nodeCase{
		{name: "a labelled node without taints gets the taint", node: "labelled",
			labels: labelled,
			want:   []corev1.Taint{startupTaint}},
		{name: "a labelled node keeps its other taints and gains the taint", node: "labelled-tainted",
			labels: labelled,
			taints: []corev1.Taint{dedicatedTaint, gpuTaint},
			want:   []corev1.Taint{dedicatedTaint, gpuTaint, startupTaint}},
		{name: "a labelled node registered with the taint has it once", node: "labelled-registered",
			labels: labelled,
			taints: []corev1.Taint{startupTaint},
			want:   []corev1.Taint{startupTaint}},
		{name: "a labelled node created already verified has none", node: "labelled-verified",
			labels: map[string]string{taintOnCreateLabel: "true", "node-ready/verified": "true"}},
		{name: "an unlabelled node has none", node: "unlabelled"},
		{name: "an unlabelled node keeps exactly its own taints", node: "unlabelled-tainted",
			taints: []corev1.Taint{dedicatedTaint},
			want:   []corev1.Taint{dedicatedTaint}},
		{name: "a node with another value of the label has none", node: "label-false",
			labels: map[string]string{taintOnCreateLabel: "false"}},
		{name: "a control-plane node without the label has none", node: "control-plane",
			labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { checkNode(t, admin, tc) })
	}

	t.Run("a kubelet registering with the label gets the taint", func(t *testing.T) {
		// NodeRestriction lets a kubelet set labels outside the kubernetes.io
		// and k8s.io namespaces: --node-labels=node-ready/taint-on-create=true.
		kubelet := clientAs(t, cp, "system:node:kubelet-labelled", "system:nodes")
		createNode(t, kubelet, "kubelet-labelled", linux(map[string]string{
			"kubernetes.io/hostname": "kubelet-labelled", taintOnCreateLabel: "true"}), nil)
		assert.Equal(t, []corev1.Taint{startupTaint}, ownTaints(getNode(t, admin, "kubelet-labelled")))
	})

	// Both files together: each is installable on its own, and together they
	// still give a node the taint once.
	install(t, cp, "startup-taint.yaml", nil)
	both := []nodeCase{
		{name: "with both policies an unlabelled node without taints gets the startup taint", node: "both-unlabelled",
			want: []corev1.Taint{startupTaint}},
		{name: "with both policies a labelled node gets the taint once", node: "both-labelled",
			labels: labelled,
			want:   []corev1.Taint{startupTaint}},
		{name: "with both policies a labelled node with other taints gets the taint once", node: "both-labelled-tainted",
			labels: labelled,
			taints: []corev1.Taint{dedicatedTaint},
			want:   []corev1.Taint{dedicatedTaint, startupTaint}},
	}
	for _, tc := range both {
		t.Run(tc.name, func(t *testing.T) { checkNode(t, admin, tc) })
	}
}

// checkNode creates the case's node through the API and reads it back. The node is a Linux
// node, as every kubelet labels its node, unless the case says otherwise.
func checkNode(t *testing.T, c kubernetes.Interface, tc nodeCase) {
	t.Helper()
	createNode(t, c, tc.node, linux(tc.labels), tc.taints)
	got := ownTaints(getNode(t, c, tc.node))
	if len(tc.want) == 0 {
		assert.Empty(t, got)
		return
	}
	assert.Equal(t, tc.want, got)
	assert.Equal(t, countStartupTaints(tc.want), countStartupTaints(got), "taints with the startup taint's key and effect")
}

// countStartupTaints counts the taints with the startup taint's key and
// effect, whatever their value: a node may hold one at most.
func countStartupTaints(taints []corev1.Taint) int {
	n := 0
	for _, taint := range taints {
		if taint.Key == startupTaint.Key && taint.Effect == startupTaint.Effect {
			n++
		}
	}
	return n
}

// requireMutatingAdmissionPolicyV1 checks that the API server serves both
// kinds in admissionregistration.k8s.io/v1, with no flags beyond the defaults.
func requireMutatingAdmissionPolicyV1(t *testing.T, c kubernetes.Interface) {
	t.Helper()
	list, err := c.Discovery().ServerResourcesForGroupVersion("admissionregistration.k8s.io/v1")
	require.NoError(t, err)
	var kinds []string
	for _, r := range list.APIResources {
		kinds = append(kinds, r.Kind)
	}
	require.Contains(t, kinds, "MutatingAdmissionPolicy")
	require.Contains(t, kinds, "MutatingAdmissionPolicyBinding")
}

// install applies one file of manifests/node-creation/ and waits until the
// policy is in force: policies are loaded asynchronously after they are
// created. The probe is a dry-run create of a Linux node with canaryLabels, which
// runs the whole admission chain and stores nothing.
func install(t *testing.T, cp *controlplane.ControlPlane, file string, canaryLabels map[string]string) {
	t.Helper()
	start := time.Now()
	kubectl(t, cp, "apply", "-f", filepath.Join("..", "..", "manifests", "node-creation", file))
	attempts := 0
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		attempts++
		canary := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "canary", Labels: linux(canaryLabels)}}
		n, err := cp.Client().CoreV1().Nodes().Create(ctx, canary, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err
		}
		return hasStartupTaint(n), nil
	})
	require.NoError(t, err, "%s did not come into force", file)
	t.Logf("%s in force %v after kubectl apply (%d dry-run canary creates)", file, time.Since(start).Round(time.Millisecond), attempts)
}

func kubectl(t *testing.T, cp *controlplane.ControlPlane, args ...string) string {
	t.Helper()
	return kubectlWithInput(t, cp, "", args...)
}

// kubectlWithInput runs kubectl against the control plane with input on stdin.
func kubectlWithInput(t *testing.T, cp *controlplane.ControlPlane, input string, args ...string) string {
	t.Helper()
	binDir, err := controlplane.DefaultBinDir()
	require.NoError(t, err)
	args = append([]string{"--kubeconfig", cp.Kubeconfig()}, args...)
	cmd := exec.CommandContext(t.Context(), filepath.Join(binDir, "kubectl"), args...)
	cmd.Stdin = strings.NewReader(input)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "kubectl %s: %s", strings.Join(args[2:], " "), out)
	return string(out)
}

func createNode(t *testing.T, c kubernetes.Interface, name string, labels map[string]string, taints []corev1.Taint) {
	t.Helper()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{Taints: taints},
	}
	_, err := c.CoreV1().Nodes().Create(t.Context(), node, metav1.CreateOptions{})
	require.NoError(t, err)
}

// linux returns labels with kubernetes.io/os=linux added, unless they set that key.
func linux(labels map[string]string) map[string]string {
	out := map[string]string{"kubernetes.io/os": "linux"}
	maps.Copy(out, labels)
	return out
}

func getNode(t *testing.T, c kubernetes.Interface, name string) *corev1.Node {
	t.Helper()
	n, err := c.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return n
}

// ownTaints are the node's taints without those Kubernetes itself manages
// under node.kubernetes.io/ (TaintNodesByCondition adds not-ready at
// creation; the node lifecycle controller adds others to nodes that never
// report status, as these do not).
func ownTaints(n *corev1.Node) []corev1.Taint {
	var own []corev1.Taint
	for _, taint := range n.Spec.Taints {
		if !strings.HasPrefix(taint.Key, "node.kubernetes.io/") {
			own = append(own, taint)
		}
	}
	return own
}

func hasStartupTaint(n *corev1.Node) bool {
	for _, taint := range n.Spec.Taints {
		if taint.MatchTaint(&startupTaint) {
			return true
		}
	}
	return false
}

// clientAs is an admin client impersonating user in group, such as a kubelet.
func clientAs(t *testing.T, cp *controlplane.ControlPlane, user, group string) kubernetes.Interface {
	t.Helper()
	cfg := cp.RESTConfig()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{group, "system:authenticated"}}
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return c
}

func taintsJSON(t *testing.T, taints []corev1.Taint) string {
	t.Helper()
	b, err := json.Marshal(taints)
	require.NoError(t, err)
	return string(b)
}

func withoutStartupTaint(taints []corev1.Taint) []corev1.Taint {
	var rest []corev1.Taint
	for _, taint := range taints {
		if taint.Key != startupTaint.Key || taint.Effect != startupTaint.Effect {
			rest = append(rest, taint)
		}
	}
	return rest
}
