package security

import (
	"context"
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

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/controlplane"
	"github.com/nodeready/nodeready/internal/kube/adapt"
	"github.com/nodeready/nodeready/internal/wellknown"
	"github.com/nodeready/nodeready/nodepatch"
)

const (
	namespace      = "kube-system"
	serviceAccount = "nodeready"
)

var (
	startupTaint = corev1.Taint{Key: "node-ready/unverified", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	foreignTaint = corev1.Taint{Key: "example.com/dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}
	releaseSpec  = nodepatch.Spec{Taints: []corev1.Taint{startupTaint}, LabelKey: "node-ready/verified", LabelValue: "true"}
)

// write is one attempted node write.
type write struct {
	name   string
	node   string
	patch  string // JSON merge patch, or a JSON Patch when it starts with '['
	status bool   // to the status subresource
}

func (w write) do(ctx context.Context, c kubernetes.Interface) error {
	pt := types.MergePatchType
	if w.patch[0] == '[' {
		pt = types.JSONPatchType
	}
	var sub []string
	if w.status {
		sub = []string{"status"}
	}
	_, err := c.CoreV1().Nodes().Patch(ctx, w.node, pt, []byte(w.patch), metav1.PatchOptions{FieldManager: forbiddenManager}, sub...)
	return err
}

// forbiddenManager is the field manager of every forbidden write: a write that got
// through would leave it in the node's managedFields.
const forbiddenManager = "nodeready-forbidden-write"

// targets is what the forbidden writes aim at. The controllers beside the API server
// write other parts of the same nodes meanwhile (the TTL controller an annotation, the
// node lifecycle controller its taints and conditions), so the resourceVersion is no test.
type targets struct {
	Labels, Annotations map[string]string
	Taints              []corev1.Taint
	Unschedulable       bool
	ProviderID          string
	Finalizers          []string
	Capacity            corev1.ResourceList
	Conditions          []corev1.NodeCondition // the agent's, and any a forbidden write faked
	DaemonEndpoints     corev1.NodeDaemonEndpoints
	NodeInfo            corev1.NodeSystemInfo
	Images              []corev1.ContainerImage
	VolumesAttached     []corev1.AttachedVolume
	VolumesInUse        []corev1.UniqueVolumeName
	RuntimeHandlers     []corev1.NodeRuntimeHandler
	Addresses           []corev1.NodeAddress
}

func targetsOf(n *corev1.Node) targets {
	t := targets{Labels: n.Labels, Annotations: map[string]string{}, Unschedulable: n.Spec.Unschedulable,
		ProviderID: n.Spec.ProviderID, Finalizers: n.Finalizers, Capacity: n.Status.Capacity,
		DaemonEndpoints: n.Status.DaemonEndpoints, NodeInfo: n.Status.NodeInfo, Images: n.Status.Images,
		VolumesAttached: n.Status.VolumesAttached, VolumesInUse: n.Status.VolumesInUse,
		RuntimeHandlers: n.Status.RuntimeHandlers, Addresses: n.Status.Addresses}
	for k, v := range n.Annotations {
		if strings.HasPrefix(k, "example.com/") {
			t.Annotations[k] = v
		}
	}
	for _, taint := range n.Spec.Taints {
		if !strings.HasPrefix(taint.Key, "node.kubernetes.io/") {
			t.Taints = append(t.Taints, taint)
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == wellknown.ConditionType || c.Reason == "Faked" {
			t.Conditions = append(t.Conditions, c)
		}
	}
	return t
}

func managers(n *corev1.Node) []string {
	var m []string
	for _, f := range n.ManagedFields {
		m = append(m, f.Manager)
	}
	return m
}

func TestAgentMayChangeOnlyItsOwnNode(t *testing.T) {
	cp, admin, nodeA, nodeB, agentA := twoNodes(t)
	ctx := t.Context()
	waitForPolicy(t, admin, agentA)

	// Writes the agent on node A must never get through: to node B at all,
	// and to its own node anything beyond the verified label and the startup taint.
	forbidden := []write{
		{"label node B", nodeB, `{"metadata":{"labels":{"node-ready/verified":"true"}}}`, false},
		{"change a label of node B", nodeB, `{"metadata":{"labels":{"pool":"other"}}}`, false},
		{"remove the startup taint of node B", nodeB, `{"spec":{"taints":[{"key":"example.com/dedicated","value":"infra","effect":"NoSchedule"}]}}`, false},
		{"add a taint to node B", nodeB, `[{"op":"add","path":"/spec/taints/-","value":{"key":"evil","effect":"NoExecute"}}]`, false},
		{"annotate node B", nodeB, `{"metadata":{"annotations":{"example.com/owner":"mallory"}}}`, false},
		{"cordon node B", nodeB, `{"spec":{"unschedulable":true}}`, false},
		{"change an unrelated label of node A", nodeA, `{"metadata":{"labels":{"pool":"other"}}}`, false},
		{"remove an unrelated label of node A", nodeA, `{"metadata":{"labels":{"pool":null}}}`, false},
		{"add a label to node A", nodeA, `{"metadata":{"labels":{"node-role.kubernetes.io/control-plane":""}}}`, false},
		{"remove an unrelated taint of node A", nodeA, `{"spec":{"taints":[{"key":"node-ready/unverified","value":"true","effect":"NoSchedule"}]}}`, false},
		{"add a taint to node A", nodeA, `[{"op":"add","path":"/spec/taints/-","value":{"key":"evil","effect":"NoExecute"}}]`, false},
		{"cordon node A", nodeA, `{"spec":{"unschedulable":true}}`, false},
		{"edit an annotation of node A", nodeA, `{"metadata":{"annotations":{"example.com/owner":"mallory"}}}`, false},
		{"remove an annotation of node A", nodeA, `{"metadata":{"annotations":{"example.com/owner":null}}}`, false},
		{"add an annotation to node A", nodeA, `{"metadata":{"annotations":{"example.com/new":"x"}}}`, false},
		{"set the provider ID of node A", nodeA, `{"spec":{"providerID":"aws:///evil"}}`, false},
		{"add a finalizer to node A", nodeA, `{"metadata":{"finalizers":["example.com/hold"]}}`, false},
		{"report node A Ready in its status", nodeA, `{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Faked"}]}}`, true},
		{"raise node A's capacity", nodeA, `{"status":{"capacity":{"pods":"1000"}}}`, true},
		// The rest of the status, field by field: the policy compares the whole status.
		{"point node A's kubelet endpoint elsewhere", nodeA, `{"status":{"daemonEndpoints":{"kubeletEndpoint":{"Port":10666}}}}`, true},
		{"rewrite node A's node info", nodeA, `{"status":{"nodeInfo":{"kubeletVersion":"v9.9.9","osImage":"Evil OS"}}}`, true},
		{"list an image on node A", nodeA, `{"status":{"images":[{"names":["example.com/evil:latest"],"sizeBytes":1}]}}`, true},
		{"attach a volume to node A", nodeA, `{"status":{"volumesAttached":[{"name":"kubernetes.io/csi/evil^vol-1","devicePath":"/dev/evil"}]}}`, true},
		{"mark a volume in use on node A", nodeA, `{"status":{"volumesInUse":["kubernetes.io/csi/evil^vol-1"]}}`, true},
		{"add a runtime handler to node A", nodeA, `{"status":{"runtimeHandlers":[{"name":"evil","features":{"recursiveReadOnlyMounts":true}}]}}`, true},
		{"change node A's addresses", nodeA, `{"status":{"addresses":[{"type":"InternalIP","address":"192.0.2.66"}]}}`, true},
		// Bounded: the agent's own condition and annotations, on its own node.
		{"add a second condition of the agent's type to node A", nodeA,
			`{"status":{"conditions":[{"type":"node-ready/Verified","status":"True","reason":"Verified"},` +
				`{"type":"node-ready/Verified","status":"False","reason":"Twice"}]}}`, true},
		{"write a huge message in node A's condition", nodeA,
			`{"status":{"conditions":[{"type":"node-ready/Verified","status":"True","reason":"Verified","message":"` + strings.Repeat("x", 5000) + `"}]}}`, true},
		{"write a huge completion annotation on node A", nodeA,
			`{"metadata":{"annotations":{"node-ready/verified-at":"` + strings.Repeat("x", 4096) + `"}}}`, false},
		{"write the condition of node B", nodeB, `{"status":{"conditions":[{"type":"node-ready/Verified","status":"True","reason":"Verified"}]}}`, true},
	}
	const repeats = 3
	attempted, denied := 0, 0
	try := func(t *testing.T, c kubernetes.Interface, w write, wantMessage string) {
		t.Helper()
		before := framework.GetNode(t, admin, w.node)
		for range repeats {
			attempted++
			err := w.do(ctx, c)
			if assert.Error(t, err, "%s got through", w.name) && assert.True(t, apierrors.IsForbidden(err), "%s: want 403, got %v", w.name, err) {
				denied++
				assert.Contains(t, err.Error(), wantMessage)
			}
		}
		after := framework.GetNode(t, admin, w.node)
		assert.Equal(t, targetsOf(before), targetsOf(after), "%s changed the node", w.name)
		assert.NotContains(t, managers(after), forbiddenManager, "%s got into the node's managedFields", w.name)
	}
	for _, w := range forbidden {
		t.Run("pod-bound token: "+w.name, func(t *testing.T) {
			want := "may change only its own node"
			if w.node == nodeA {
				want = "write to node " + nodeA + " refused"
			}
			try(t, agentA, w, want)
		})
	}

	// A ServiceAccount token that is not bound to a pod names no node, so it
	// may write no node at all, not even the release.
	plain := plainClient(t, cp)
	noNode := append(forbidden, write{"release node A", nodeA,
		`{"metadata":{"labels":{"node-ready/verified":"true"}},"spec":{"taints":[{"key":"example.com/dedicated","value":"infra","effect":"NoSchedule"}]}}`, false})
	for _, w := range noNode {
		t.Run("plain token: "+w.name, func(t *testing.T) { try(t, plain, w, "carries no node name") })
	}

	// Impersonating the ServiceAccount carries no user extras at all: the
	// policy still refuses, with its own message rather than a CEL error.
	cfg := cp.RESTConfig()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:kube-system:nodeready"}
	impersonated, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	t.Run("impersonated, no extras: release node A", func(t *testing.T) { try(t, impersonated, noNode[len(noNode)-1], "carries no node name") })

	t.Logf("forbidden writes attempted: %d, denied: %d", attempted, denied)
	assert.Equal(t, attempted, denied)
	assert.Equal(t, (len(forbidden)+len(noNode)+1)*repeats, attempted)

	t.Run("the agent's own release still passes", func(t *testing.T) {
		p := nodepatch.New(adapt.Clientset(agentA), nodeA, releaseSpec)
		outcome, err := p.Release(ctx, map[string]string{"node-ready/verified-at": "2026-11-21T08:00:00Z", "node-ready/verified-duration": "1s"})
		require.NoError(t, err)
		assert.Equal(t, nodepatch.Patched, outcome)
		wrote, err := p.SetCondition(ctx, wellknown.Condition{Status: corev1.ConditionTrue, Reason: wellknown.Verified, Message: "All checks passed"})
		require.NoError(t, err)
		assert.True(t, wrote)
		n := framework.GetNode(t, admin, nodeA)
		assert.Equal(t, "true", n.Labels["node-ready/verified"])
		assert.Equal(t, "1s", n.Annotations["node-ready/verified-duration"])
		if conditions := targetsOf(n).Conditions; assert.Len(t, conditions, 1) {
			assert.Equal(t, wellknown.ConditionType, conditions[0].Type)
		}
		assert.Equal(t, "gpu", n.Labels["pool"])
		assert.Equal(t, []corev1.Taint{foreignTaint}, targetsOf(n).Taints)
		assert.Equal(t, "team-a", n.Annotations["example.com/owner"])

		// Putting the startup taint back (re-verification) and releasing
		// again are the agent's too.
		_, err = agentA.CoreV1().Nodes().Patch(ctx, nodeA, types.JSONPatchType,
			[]byte(`[{"op":"add","path":"/spec/taints/-","value":{"key":"node-ready/unverified","value":"true","effect":"NoSchedule"}}]`),
			metav1.PatchOptions{FieldManager: wellknown.FieldManager})
		require.NoError(t, err)
		outcome, err = p.Release(ctx, nil)
		require.NoError(t, err)
		assert.Equal(t, nodepatch.Patched, outcome)
		outcome, err = p.Release(ctx, nil)
		require.NoError(t, err)
		assert.Equal(t, nodepatch.Unchanged, outcome)
	})

	t.Run("node B is untouched and admins are not restricted", func(t *testing.T) {
		n := framework.GetNode(t, admin, nodeB)
		assert.NotContains(t, n.Labels, "node-ready/verified")
		assert.ElementsMatch(t, []corev1.Taint{startupTaint, foreignTaint}, targetsOf(n).Taints)
		_, err := admin.CoreV1().Nodes().Patch(ctx, nodeB, types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{})
		require.NoError(t, err)
	})
}

// waitForPolicy waits until the policy is in force: admission policies are
// loaded asynchronously after they are created. The probe is a forbidden
// write to a node made only for it, so no counted attempt can race the load.
// twoNodes starts a control plane with manifests/ applied and nodes node-a and node-b, and
// returns a client with the token of an agent pod on node-a, as the kubelet would mount it.
func twoNodes(t *testing.T) (cp *controlplane.ControlPlane, admin kubernetes.Interface, nodeA, nodeB string, agentA kubernetes.Interface) {
	t.Helper()
	cp = framework.New(t, framework.Options{ControlPlaneOnly: true}).ControlPlane()
	admin = cp.Client()
	applyManifests(t, cp)
	nodeA, nodeB = createNode(t, admin, "node-a"), createNode(t, admin, "node-b")
	agentA = agentClient(t, cp, agentPod(t, admin, nodeA))
	return cp, admin, nodeA, nodeB, agentA
}

func waitForPolicy(t *testing.T, admin, agent kubernetes.Interface) {
	t.Helper()
	canary := createNode(t, admin, "canary")
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := agent.CoreV1().Nodes().Patch(ctx, canary, types.MergePatchType, []byte(`{"metadata":{"labels":{"canary":"x"}}}`), metav1.PatchOptions{})
		if err == nil { // got through before the policy loaded: undo and wait
			_, err = admin.CoreV1().Nodes().Patch(ctx, canary, types.MergePatchType, []byte(`{"metadata":{"labels":{"canary":null}}}`), metav1.PatchOptions{})
			return false, err
		}
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "nodeready: write to node"), nil
	})
	require.NoError(t, err, "the admission policy did not come into force")
}

func applyManifests(t *testing.T, cp *controlplane.ControlPlane) {
	t.Helper()
	out, err := cp.Kubectl(t.Context(), nil, "apply", "-f", filepath.Join("..", "..", "..", "manifests"))
	require.NoError(t, err, "kubectl apply -f manifests/: %s", out)
}

func createNode(t *testing.T, c kubernetes.Interface, name string) string {
	t.Helper()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels:      map[string]string{"pool": "gpu", "kubernetes.io/hostname": name},
			Annotations: map[string]string{"example.com/owner": "team-a"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{startupTaint, foreignTaint}},
	}
	_, err := c.CoreV1().Nodes().Create(t.Context(), node, metav1.CreateOptions{})
	require.NoError(t, err)
	return name
}

// agentPod creates a pod of the agent's ServiceAccount bound to node, as the
// DaemonSet would; no kubelet runs it, it only anchors the token.
func agentPod(t *testing.T, c kubernetes.Interface, node string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "nodeready-", Namespace: namespace},
		Spec: corev1.PodSpec{
			ServiceAccountName: serviceAccount,
			NodeName:           node,
			Containers:         []corev1.Container{{Name: "nodeready", Image: "nodeready"}},
		},
	}
	pod, err := c.CoreV1().Pods(namespace).Create(t.Context(), pod, metav1.CreateOptions{})
	require.NoError(t, err)
	return pod
}

// agentClient returns a client with the token the kubelet gets for the pod.
func agentClient(t *testing.T, cp *controlplane.ControlPlane, pod *corev1.Pod) kubernetes.Interface {
	t.Helper()
	return controlplane.ServiceAccountClientForTest(t, cp, namespace, serviceAccount, pod.Name, pod.UID)
}

// plainClient returns a client with a token of the agent's ServiceAccount that is bound to no
// pod, and so names no node.
func plainClient(t *testing.T, cp *controlplane.ControlPlane) kubernetes.Interface {
	t.Helper()
	return controlplane.ServiceAccountClientForTest(t, cp, namespace, serviceAccount, "", "")
}
