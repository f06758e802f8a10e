package controlplane_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/nodeready/nodeready/e2e/framework/controlplane"
)

const (
	startupTaintKey = "node-ready/unverified"
	nodeNameExtra   = "authentication.kubernetes.io/node-name"
	waitTimeout     = time.Minute
)

func TestControlPlane(t *testing.T) {
	cp := controlplane.StartForTest(t)
	client := cp.Client()
	ctx := t.Context()

	ns := createNamespace(t, client, "smoke")
	node := createReadyNode(t, client, "node-a")

	var pod *corev1.Pod
	t.Run("daemonset pod is created and bound to the tainted node", func(t *testing.T) {
		ds := newDaemonSet(ns)
		_, err := client.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{})
		require.NoError(t, err)

		err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
			pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=smoke"})
			if err != nil || len(pods.Items) == 0 || pods.Items[0].Spec.NodeName == "" {
				return false, nil
			}
			pod = &pods.Items[0]
			return true, nil
		})
		require.NoError(t, err, "no DaemonSet pod bound to %s", node.Name)
		assert.Equal(t, node.Name, pod.Spec.NodeName)
		require.NotEmpty(t, pod.OwnerReferences)
		assert.Equal(t, "DaemonSet", pod.OwnerReferences[0].Kind)
	})

	t.Run("pod-bound token carries the node name", func(t *testing.T) {
		require.NotNil(t, pod, "needs the bound DaemonSet pod")
		podClient := controlplane.ServiceAccountClientForTest(t, cp, ns, pod.Spec.ServiceAccountName, pod.Name, pod.UID)
		review, err := podClient.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		require.NoError(t, err)

		user := review.Status.UserInfo
		assert.Equal(t, "system:serviceaccount:"+ns+":"+pod.Spec.ServiceAccountName, user.Username)
		assert.Equal(t, authenticationv1.ExtraValue{node.Name}, user.Extra[nodeNameExtra])
		assert.Equal(t, authenticationv1.ExtraValue{pod.Name}, user.Extra["authentication.kubernetes.io/pod-name"])
	})

	t.Run("mutating admission policy is served at v1 and applies", func(t *testing.T) {
		createLabelPolicy(t, client, ns)
		// The policy takes effect once the API server's policy informer has seen it.
		var labels map[string]string
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
			cm, err := client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"}}, metav1.CreateOptions{})
			if err != nil {
				return false, err
			}
			labels = cm.Labels
			return labels["smoke.nodeready.io/mutated"] == "true", nil
		})
		require.NoError(t, err, "policy not applied; labels %v", labels)
	})

	t.Run("client works again after API server restart", func(t *testing.T) {
		require.NoError(t, cp.RestartAPIServer(ctx, 2*time.Second))
		got, err := client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, node.UID, got.UID)

		// Writes work too, and the controllers are back: a new namespace gets its ServiceAccount.
		createNamespace(t, client, "after-restart")
	})
}

func createNamespace(t *testing.T, client kubernetes.Interface, prefix string) string {
	t.Helper()
	ns, err := client.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: map[string]string{"smoke.nodeready.io/test": "true"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	// Pods need the namespace's default ServiceAccount, which the controller manager creates.
	err = wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	require.NoError(t, err, "no default ServiceAccount in %s", ns.Name)
	return ns.Name
}

// createReadyNode creates a Node as a kubelet registers it: with the startup taint, capacity
// and a Ready condition, which the scheduler needs before it binds anything.
func createReadyNode(t *testing.T, client kubernetes.Interface, name string) *corev1.Node {
	t.Helper()
	resources := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("4"),
		corev1.ResourceMemory: resource.MustParse("16Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	now := metav1.Now()
	node, err := client.CoreV1().Nodes().Create(t.Context(), &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: startupTaintKey, Value: "true", Effect: corev1.TaintEffectNoSchedule},
		}},
		Status: corev1.NodeStatus{
			Capacity:    resources,
			Allocatable: resources,
			Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				LastHeartbeatTime: now, LastTransitionTime: now,
			}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, node.Status.Allocatable, "node status was not stored on create")
	return node
}

func newDaemonSet(ns string) *appsv1.DaemonSet {
	labels := map[string]string{"app": "smoke"}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke", Namespace: ns},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Tolerations: []corev1.Toleration{{Key: startupTaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
					Containers:  []corev1.Container{{Name: "agent", Image: "registry.k8s.io/pause:3.10"}},
				},
			},
		},
	}
}

// createLabelPolicy adds a label to every ConfigMap created in the namespace.
func createLabelPolicy(t *testing.T, client kubernetes.Interface, ns string) {
	t.Helper()
	policy := &admissionregistrationv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke-label-" + ns},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
						Rule: admissionregistrationv1.Rule{
							APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"},
						},
					},
				}},
			},
			Mutations: []admissionregistrationv1.Mutation{{
				PatchType: admissionregistrationv1.PatchTypeApplyConfiguration,
				ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{
					Expression: `Object{metadata: Object.metadata{labels: {"smoke.nodeready.io/mutated": "true"}}}`,
				},
			}},
			FailurePolicy:      ptr.To(admissionregistrationv1.Fail),
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
		},
	}
	_, err := client.AdmissionregistrationV1().MutatingAdmissionPolicies().Create(t.Context(), policy, metav1.CreateOptions{})
	require.NoError(t, err)

	binding := &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
		Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{
			PolicyName: policy.Name,
			MatchResources: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			},
		},
	}
	_, err = client.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Create(t.Context(), binding, metav1.CreateOptions{})
	require.NoError(t, err)
}
