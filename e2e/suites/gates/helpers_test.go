package gates

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeready/nodeready/e2e/framework"
)

// baseChecks are the shipped default CHECKS; each test adds its gate.
const baseChecks = "dns,tcp,apiserver,endpoints"

// sampleInterval is how often the tests that time a release look at the cluster.
const sampleInterval = 100 * time.Millisecond

// createDaemonSet creates a DaemonSet in kube-system whose pods go only to the fleet's
// nodes, and deletes it when the test ends. Its image is not the agent's, so the simulated
// kubelet simulates its pods.
func createDaemonSet(t *testing.T, client kubernetes.Interface, name, fleet string, tolerations []corev1.Toleration, annotations map[string]string) *appsv1.DaemonSet {
	t.Helper()
	labels := map[string]string{"app.kubernetes.io/name": name}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: framework.Namespace, Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{framework.FleetLabel: fleet},
					Tolerations:  tolerations,
					Containers:   []corev1.Container{{Name: name, Image: "example.com/" + name + ":v1"}},
				},
			},
		},
	}
	ds, err := client.AppsV1().DaemonSets(framework.Namespace).Create(t.Context(), ds, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := client.AppsV1().DaemonSets(framework.Namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("cleanup: delete daemonset %s: %v", name, err)
		}
	})
	return ds
}

// podsOf returns the pods on the node that the DaemonSet owns.
func podsOf(pods []corev1.Pod, ds *appsv1.DaemonSet) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range pods {
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.UID == ds.UID {
			out = append(out, p)
		}
	}
	return out
}
