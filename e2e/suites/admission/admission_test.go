package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"path/filepath"
	"slices"
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

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/controlplane"
	"github.com/nodeready/nodeready/e2e/framework/promtext"
	"github.com/nodeready/nodeready/internal/wellknown"
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

// nodeCase is a Node created through the API and the taints it must have.
type nodeCase struct {
	name   string
	node   string
	labels map[string]string
	taints []corev1.Taint
	want   []corev1.Taint
}

func TestStartupTaintPolicy(t *testing.T) {
	cp := framework.New(t, framework.Options{ControlPlaneOnly: true}).ControlPlane()
	admin := cp.Client()
	requireMutatingAdmissionPolicyV1(t, admin)

	t.Run("the default install leaves the policies out", func(t *testing.T) {
		out := kubectl(t, cp, "apply", "-f", filepath.Join("..", "..", "..", "manifests"), "--dry-run=client", "-o", "name")
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

	// NodeReadyTaintPolicyFailing (manifests/monitoring/) reads the API server's count of the
	// policy's mutations by outcome: the series is there, under the name and labels it selects.
	t.Run("the API server counts the policy's mutations, as the alert reads them", func(t *testing.T) {
		raw, err := admin.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(t.Context())
		require.NoError(t, err)
		samples, err := promtext.Parse(bytes.NewReader(raw), "apiserver_mutating_admission_policy_check_total")
		require.NoError(t, err)
		var mutated float64
		for _, s := range samples {
			if s.Labels["policy"] == "nodeready-startup-taint" && s.Labels["policy_binding"] == "nodeready-startup-taint" &&
				s.Labels["error_type"] == "no_error" {
				mutated += s.Value
			}
		}
		assert.Positive(t, mutated, "no apiserver_mutating_admission_policy_check_total{policy=\"nodeready-startup-taint\", error_type=\"no_error\"}: %v", samples)
	})

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
		assert.Equal(t, []corev1.Taint{startupTaint}, ownTaints(framework.GetNode(t, admin, "kubelet-worker")),
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
		assert.Empty(t, ownTaints(framework.GetNode(t, admin, "kubelet-control-plane")),
			"a kubelet's node with the opt-out label gets no taint")
	})

	t.Run("the agent's release is not undone", func(t *testing.T) {
		const name = "released"
		createNode(t, admin, name, linux(map[string]string{"kubernetes.io/hostname": name}), []corev1.Taint{dedicatedTaint})
		require.Equal(t, []corev1.Taint{dedicatedTaint, startupTaint}, ownTaints(framework.GetNode(t, admin, name)))

		// The release as the agent sends it (README, "How the node is released"):
		// one JSON Patch, an UPDATE, that tests the taints as read, replaces them
		// without the startup taint and adds the verified label. Like the agent,
		// read again and retry when the test fails (422): kube-controller-manager
		// may write the taints of a new node at the same moment.
		err := retry.OnError(retry.DefaultBackoff, apierrors.IsInvalid, func() error {
			taints := framework.GetNode(t, admin, name).Spec.Taints
			release := `[{"op":"test","path":"/spec/taints","value":` + taintsJSON(t, taints) + `},` +
				`{"op":"replace","path":"/spec/taints","value":` + taintsJSON(t, withoutStartupTaint(taints)) + `},` +
				`{"op":"add","path":"/metadata/labels/node-ready~1verified","value":"true"}]`
			_, err := admin.CoreV1().Nodes().Patch(t.Context(), name, types.JSONPatchType, []byte(release), metav1.PatchOptions{})
			return err
		})
		require.NoError(t, err)
		n := framework.GetNode(t, admin, name)
		assert.Equal(t, []corev1.Taint{dedicatedTaint}, ownTaints(n))
		assert.Equal(t, "true", n.Labels["node-ready/verified"])

		// Any later update leaves the node untainted too.
		_, err = admin.CoreV1().Nodes().Patch(t.Context(), name, types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"example.com/pool":"workers"}}}`), metav1.PatchOptions{})
		require.NoError(t, err)
		assert.Equal(t, []corev1.Taint{dedicatedTaint}, ownTaints(framework.GetNode(t, admin, name)))
	})
}

// TestLabelToTaintPolicy runs on an API server without the
// TaintNodesByCondition admission plugin, which otherwise gives every new
// node the not-ready taint before the policies run: here a node can be
// created without any taint, the case in which the policy must create the
// taint list rather than append to it.
func TestLabelToTaintPolicy(t *testing.T) {
	cp := framework.New(t, framework.Options{ControlPlaneOnly: true, Cluster: framework.ClusterOptions{ControlPlane: controlplane.Options{
		APIServerArgs: []string{"--disable-admission-plugins=TaintNodesByCondition"},
	}}}).ControlPlane()
	admin := cp.Client()
	requireMutatingAdmissionPolicyV1(t, admin)
	plain, err := admin.CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "plain"}},
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	require.NoError(t, err)
	require.Nil(t, plain.Spec.Taints, "without TaintNodesByCondition a new node has no taint list")

	// Nodes labelled before the policy exists: they get nothing until the catch-up.
	createNode(t, admin, "before-labelled", linux(dedicated), nil)
	createNode(t, admin, "before-unlabelled", linux(nil), []corev1.Taint{dedicatedTaint})

	installLabelToTaint(t, cp, filepath.Join("..", "..", "..", "manifests", "label-to-taint"))

	t.Run("at creation", func(t *testing.T) {
		cases := []nodeCase{
			{name: "a labelled node without taints gets the taint", node: "labelled",
				labels: dedicated,
				want:   []corev1.Taint{ciTaint}},
			{name: "a labelled node keeps its other taints and gains the taint", node: "labelled-tainted",
				labels: dedicated,
				taints: []corev1.Taint{dedicatedTaint, gpuTaint},
				want:   []corev1.Taint{dedicatedTaint, gpuTaint, ciTaint}},
			{name: "a labelled node registered with the taint has it once", node: "labelled-registered",
				labels: dedicated,
				taints: []corev1.Taint{ciTaint},
				want:   []corev1.Taint{ciTaint}},
			{name: "a labelled node registered with the taint's key and effect keeps that value", node: "labelled-other-value",
				labels: dedicated,
				taints: []corev1.Taint{ciOtherValue},
				want:   []corev1.Taint{ciOtherValue}},
			{name: "a labelled node with nodeready's startup taint keeps it and gains the taint", node: "labelled-unverified",
				labels: dedicated,
				taints: []corev1.Taint{startupTaint},
				want:   []corev1.Taint{startupTaint, ciTaint}},
			// Not nodeready's taint: every node with the label, Windows too.
			{name: "a labelled Windows node gets the taint", node: "labelled-windows",
				labels: map[string]string{"dedicated": "ci", "kubernetes.io/os": "windows"},
				want:   []corev1.Taint{ciTaint}},
			{name: "an unlabelled node has none", node: "unlabelled"},
			{name: "an unlabelled node keeps exactly its own taints", node: "unlabelled-tainted",
				taints: []corev1.Taint{dedicatedTaint},
				want:   []corev1.Taint{dedicatedTaint}},
			{name: "a node with another value of the label has none", node: "label-other",
				labels: map[string]string{"dedicated": "gpu"}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) { checkNode(t, admin, tc) })
		}
	})

	t.Run("a kubelet registering with the label gets the taint", func(t *testing.T) {
		// NodeRestriction lets a kubelet set labels outside the kubernetes.io
		// and k8s.io namespaces: --node-labels=dedicated=ci.
		kubelet := clientAs(t, cp, "system:node:kubelet-labelled", "system:nodes")
		createNode(t, kubelet, "kubelet-labelled", linux(map[string]string{
			"kubernetes.io/hostname": "kubelet-labelled", "dedicated": "ci"}), nil)
		assert.Equal(t, []corev1.Taint{ciTaint}, ownTaints(framework.GetNode(t, admin, "kubelet-labelled")))
	})

	t.Run("on a running node", func(t *testing.T) {
		const name = "running"
		createNode(t, admin, name, linux(nil), []corev1.Taint{dedicatedTaint})

		// Label added: the answer to that very write carries the taint.
		n := patchLabels(t, admin, name, `{"dedicated":"ci"}`)
		assert.Equal(t, []corev1.Taint{dedicatedTaint, ciTaint}, ownTaints(n), "label added")

		// An unrelated update changes nothing.
		n = patchLabels(t, admin, name, `{"example.com/pool":"workers"}`)
		assert.Equal(t, []corev1.Taint{dedicatedTaint, ciTaint}, ownTaints(n), "unrelated update")

		// Label removed: exactly the rule's taint goes; a taint of the same key with
		// another effect (another controller's) and every other taint stay.
		n = setTaints(t, admin, name, []corev1.Taint{dedicatedTaint, ciNoExecute, ciTaint})
		require.Equal(t, []corev1.Taint{dedicatedTaint, ciNoExecute, ciTaint}, ownTaints(n))
		n = patchLabels(t, admin, name, `{"dedicated":null}`)
		assert.Equal(t, []corev1.Taint{dedicatedTaint, ciNoExecute}, ownTaints(n), "label removed")

		// Label back, then its value changed: the taint comes and goes.
		n = patchLabels(t, admin, name, `{"dedicated":"ci"}`)
		assert.Equal(t, []corev1.Taint{dedicatedTaint, ciNoExecute, ciTaint}, ownTaints(n), "label back")
		n = patchLabels(t, admin, name, `{"dedicated":"gpu"}`)
		assert.Equal(t, []corev1.Taint{dedicatedTaint, ciNoExecute}, ownTaints(n), "value changed")

		// A taint of the rule's key and effect with another value is not the rule's:
		// it stays when the label goes.
		n = patchLabels(t, admin, name, `{"dedicated":"ci"}`)
		assert.Equal(t, []corev1.Taint{dedicatedTaint, ciNoExecute, ciTaint}, ownTaints(n), "value changed to the rule's")
		n = setTaints(t, admin, name, []corev1.Taint{ciOtherValue})
		n = patchLabels(t, admin, name, `{"dedicated":null}`)
		assert.Equal(t, []corev1.Taint{ciOtherValue}, ownTaints(n), "another value of the key stays")

		// A taint removed by hand while the label stays is not put back by an
		// unrelated write: the policy follows the label's changes.
		n = setTaints(t, admin, name, nil)
		n = patchLabels(t, admin, name, `{"dedicated":"ci"}`)
		require.Equal(t, []corev1.Taint{ciTaint}, ownTaints(n))
		n = setTaints(t, admin, name, nil)
		n = patchLabels(t, admin, name, `{"example.com/pool":"batch"}`)
		assert.Empty(t, ownTaints(n), "a taint removed by hand stays removed")
	})

	t.Run("a kubelet's own update is never refused", func(t *testing.T) {
		// NodeRestriction refuses a kubelet's update that changes taints; the policy
		// leaves such updates alone, so the kubelet's label write goes through.
		kubelet := clientAs(t, cp, "system:node:kubelet-update", "system:nodes")
		createNode(t, kubelet, "kubelet-update", linux(map[string]string{"kubernetes.io/hostname": "kubelet-update"}), nil)
		n := patchLabels(t, kubelet, "kubelet-update", `{"dedicated":"ci"}`)
		assert.Equal(t, "ci", n.Labels["dedicated"])
		assert.Empty(t, ownTaints(n))
	})

	t.Run("the catch-up command in manifests/label-to-taint/README.md taints nodes labelled before the install", func(t *testing.T) {
		require.Empty(t, ownTaints(framework.GetNode(t, admin, "before-labelled")), "a node labelled before the install")
		kubectl(t, cp, "annotate", "nodes", "--all", "--overwrite", "node-ready/label-to-taint-sync="+time.Now().UTC().Format(time.RFC3339Nano))
		assert.Equal(t, []corev1.Taint{ciTaint}, ownTaints(framework.GetNode(t, admin, "before-labelled")), "labelled before the install")
		assert.Equal(t, []corev1.Taint{dedicatedTaint}, ownTaints(framework.GetNode(t, admin, "before-unlabelled")), "unlabelled")
		// The catch-up asks for the label's taints: a taint removed by hand comes back.
		assert.Equal(t, []corev1.Taint{ciTaint}, ownTaints(framework.GetNode(t, admin, "running")), "labelled, its taint removed by hand")
	})
}

// TestLabelToTaintRules: the rules of the kustomize/label-to-taint overlay, a list of two
// pairs, each kept in step with its label, and a rule that names nodeready's startup taint
// is never applied.
func TestLabelToTaintRules(t *testing.T) {
	cp := framework.New(t, framework.Options{ControlPlaneOnly: true}).ControlPlane()
	admin := cp.Client()
	requireMutatingAdmissionPolicyV1(t, admin)
	installLabelToTaint(t, cp, "-k", filepath.Join("..", "..", "..", "kustomize", "label-to-taint"))

	gpuPool := corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}
	createNode(t, admin, "both", linux(map[string]string{"dedicated": "ci", "example.com/pool": "gpu"}), nil)
	assert.ElementsMatch(t, []corev1.Taint{ciTaint, gpuPool}, ownTaints(framework.GetNode(t, admin, "both")), "both labels")
	n := patchLabels(t, admin, "both", `{"example.com/pool":null}`)
	assert.Equal(t, []corev1.Taint{ciTaint}, ownTaints(n), "one label removed")
	n = patchLabels(t, admin, "both", `{"example.com/pool":"gpu","dedicated":null}`)
	assert.Equal(t, []corev1.Taint{gpuPool}, ownTaints(n), "one label back, the other removed, in one write")

	// A rule for the startup taint would fight the agent's release: the policy skips it.
	kubectl(t, cp, "patch", "mutatingadmissionpolicy", "nodeready-label-to-taint", "--type=json", "-p",
		`[{"op":"test","path":"/spec/variables/0/name","value":"rules"},`+
			`{"op":"replace","path":"/spec/variables/0/expression","value":"[`+
			`{'label': 'node-ready/taint-on-create', 'value': 'true', 'taintKey': 'node-ready/unverified', 'taintValue': 'true', 'taintEffect': 'NoSchedule'},`+
			`{'label': 'dedicated', 'value': 'gpu', 'taintKey': 'dedicated', 'taintValue': 'gpu', 'taintEffect': 'NoSchedule'}]"}]`)
	gpuDedicated := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	waitPolicy(t, cp, map[string]string{"dedicated": "gpu"}, gpuDedicated)
	createNode(t, admin, "startup-rule", linux(map[string]string{"node-ready/taint-on-create": "true", "dedicated": "gpu"}), nil)
	assert.Equal(t, []corev1.Taint{gpuDedicated}, ownTaints(framework.GetNode(t, admin, "startup-rule")), "the startup taint's rule is skipped")
}

// TestLabelToTaintWithTheAgent: label-to-taint.yaml and startup-taint.yaml on one cluster
// with nodeready's agent. A node created with the label gets both taints; the agent's
// release removes only the startup taint, and the policy puts nothing back, then or later.
func TestLabelToTaintWithTheAgent(t *testing.T) {
	fw := framework.New(t, framework.Options{})
	cp := fw.ControlPlane()
	admin := fw.Client()
	requireMutatingAdmissionPolicyV1(t, admin)
	installLabelToTaint(t, cp, filepath.Join("..", "..", "..", "manifests", "label-to-taint"))
	install(t, cp, "startup-taint.yaml", nil)
	// The rule's taint is a pool's: the agent lists the tolerations it needs, and this one
	// is added as manifests/label-to-taint/README.md tells users to.
	fw.TolerateKey(ciTaint.Key)

	// Registered without taints of its own: both come from the policies.
	f := fw.NewFleet("l2t")
	const name = "l2t-ci"
	require.NoError(t, f.AddNode(t.Context(), name, framework.NodeOptions{Labels: dedicated, Untainted: true}))
	created := framework.GetNode(t, admin, name)
	require.Contains(t, created.Spec.Taints, ciTaint, "label-to-taint.yaml at creation")
	require.Equal(t, 1, countStartupTaints(created.Spec.Taints), "startup-taint.yaml at creation")

	var n *corev1.Node
	err := wait.PollUntilContextTimeout(t.Context(), pollInterval, pollTimeout, true, func(ctx context.Context) (bool, error) {
		var err error
		n, err = admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return err == nil && n.Labels[wellknown.VerifiedLabel] == "true", err
	})
	require.NoError(t, err, "node %s not released: %s", name, f.Describe(t.Context()))
	assert.Contains(t, n.Spec.Taints, ciTaint, "the policy's taint stays through the release")
	assert.Equal(t, 0, countStartupTaints(n.Spec.Taints), "the release is not undone")
	n = patchLabels(t, admin, name, `{"example.com/pool":"workers"}`)
	assert.Contains(t, n.Spec.Taints, ciTaint)
	assert.Equal(t, 0, countStartupTaints(n.Spec.Taints), "a later write leaves the node released")
}

var (
	dedicated = map[string]string{"dedicated": "ci"}
	// The shipped rule's taint, and taints of its key that are not the rule's.
	ciTaint      = corev1.Taint{Key: "dedicated", Value: "ci", Effect: corev1.TaintEffectNoSchedule}
	ciNoExecute  = corev1.Taint{Key: "dedicated", Value: "ci", Effect: corev1.TaintEffectNoExecute}
	ciOtherValue = corev1.Taint{Key: "dedicated", Value: "manual", Effect: corev1.TaintEffectNoSchedule}
)

// installLabelToTaint applies the label-to-taint policy with kubectl apply and args (a
// folder, or -k and an overlay) and waits until its dedicated=ci rule is in force.
func installLabelToTaint(t *testing.T, cp *controlplane.ControlPlane, args ...string) {
	t.Helper()
	if args[0] != "-k" {
		args = append([]string{"-f"}, args...)
	}
	kubectl(t, cp, append([]string{"apply"}, args...)...)
	waitPolicy(t, cp, dedicated, ciTaint)
}

// waitPolicy waits until a dry-run create of a Linux node with labels comes back with
// taint: policies are loaded asynchronously after they are written.
func waitPolicy(t *testing.T, cp *controlplane.ControlPlane, labels map[string]string, taint corev1.Taint) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		canary := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "canary", Labels: linux(labels)}}
		n, err := cp.Client().CoreV1().Nodes().Create(ctx, canary, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(n.Spec.Taints, func(got corev1.Taint) bool { return got == taint }), nil
	})
	require.NoError(t, err, "the policy did not come into force for %v", labels)
}

// patchLabels merges labels (a JSON object; null removes a label) into the node's and
// returns the node as the API server answered that write.
func patchLabels(t *testing.T, c kubernetes.Interface, name, labels string) *corev1.Node {
	t.Helper()
	n, err := c.CoreV1().Nodes().Patch(t.Context(), name, types.MergePatchType,
		[]byte(`{"metadata":{"labels":`+labels+`}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	return n
}

// setTaints writes the node's taints as another controller would, leaving its labels.
func setTaints(t *testing.T, c kubernetes.Interface, name string, taints []corev1.Taint) *corev1.Node {
	t.Helper()
	if taints == nil {
		taints = []corev1.Taint{}
	}
	n, err := c.CoreV1().Nodes().Patch(t.Context(), name, types.MergePatchType,
		[]byte(`{"spec":{"taints":`+taintsJSON(t, taints)+`}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	return n
}

// checkNode creates the case's node through the API and reads it back. The node is a Linux
// node, as every kubelet labels its node, unless the case says otherwise.
func checkNode(t *testing.T, c kubernetes.Interface, tc nodeCase) {
	t.Helper()
	createNode(t, c, tc.node, linux(tc.labels), tc.taints)
	got := ownTaints(framework.GetNode(t, c, tc.node))
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
	kubectl(t, cp, "apply", "-f", filepath.Join("..", "..", "..", "manifests", "node-creation", file))
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

// kubectl runs kubectl against the control plane, with input on stdin when one is given.
func kubectl(t *testing.T, cp *controlplane.ControlPlane, args ...string) string {
	t.Helper()
	return kubectlWithInput(t, cp, "", args...)
}

func kubectlWithInput(t *testing.T, cp *controlplane.ControlPlane, input string, args ...string) string {
	t.Helper()
	out, err := cp.Kubectl(t.Context(), strings.NewReader(input), args...)
	require.NoError(t, err)
	return out
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
