package realnode

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// corefile serves cluster.local from the API, as kubeadm's CoreDNS does, on an unprivileged
// port (the image runs as nonroot); there is no upstream to forward to.
const corefile = `.:1053 {
    errors
    health :8080
    ready :8181
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    cache 5
}
`

// DeployCoreDNS installs cluster DNS as kubeadm does: the coredns Deployment and the kube-dns
// Service at ClusterDNS. It does not tolerate the startup taint, like CoreDNS in any cluster:
// on a cluster whose every node is held, it schedules once the agent released a node
// (README: Bootstrap: cluster DNS). dualStack makes the Service RequireDualStack, as k3s makes
// a dual-stack cluster's (k3s-io/k3s#9152): kubeadm's and RKE2's stay single-stack
// (rancher/rke2#4772), and then its EndpointSlices list only the primary family's addresses.
func DeployCoreDNS(ctx context.Context, client kubernetes.Interface, img string, dualStack bool) error {
	const ns, name = "kube-system", "coredns"
	labels := map[string]string{"k8s-app": "kube-dns"}
	objs := []func() error{
		func() error {
			_, err := client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
				ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
				Rules: []rbacv1.PolicyRule{
					{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
					{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
				},
			}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
				RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:coredns"},
				Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
			}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"Corefile": corefile},
			}, metav1.CreateOptions{})
			return err
		},
		func() error {
			svc := &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Labels: labels},
				Spec: corev1.ServiceSpec{
					Selector:  labels,
					ClusterIP: ClusterDNS,
					Ports: []corev1.ServicePort{
						{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(1053)},
						{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(1053)},
					},
				},
			}
			if dualStack {
				svc.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
			}
			_, err := client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
				Spec: appsv1.DeploymentSpec{
					Replicas: ptr.To[int32](1),
					Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec: corev1.PodSpec{
							ServiceAccountName: name,
							PriorityClassName:  "system-cluster-critical",
							DNSPolicy:          corev1.DNSDefault,
							Tolerations: []corev1.Toleration{
								{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists},
								{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule},
							},
							Containers: []corev1.Container{{
								Name:  name,
								Image: img,
								Args:  []string{"-conf", "/etc/coredns/Corefile"},
								Ports: []corev1.ContainerPort{{Name: "dns", ContainerPort: 1053, Protocol: corev1.ProtocolUDP}},
								ReadinessProbe: &corev1.Probe{
									ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8181)}},
									PeriodSeconds: 2,
								},
								VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/coredns", ReadOnly: true}},
							}},
							Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{
								ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}},
							}}},
						},
					},
				},
			}, metav1.CreateOptions{})
			return err
		},
	}
	for _, create := range objs {
		if err := create(); err != nil {
			return fmt.Errorf("deploy CoreDNS: %w", err)
		}
	}
	return nil
}

// WaitClusterDNS waits for a ready CoreDNS pod and returns its IP and node.
func (c *Cluster) WaitClusterDNS(ctx context.Context) (ip, node string, err error) {
	p, err := c.WaitClusterDNSPod(ctx)
	if err != nil {
		return "", "", err
	}
	return p.Status.PodIP, p.Spec.NodeName, nil
}

// WaitClusterDNSPod waits for a ready CoreDNS pod and returns it (its IPs of every family are
// in Status.PodIPs).
func (c *Cluster) WaitClusterDNSPod(ctx context.Context) (*corev1.Pod, error) {
	var ready *corev1.Pod
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pods, err := c.CP.Client().CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
		if err != nil {
			return false, nil
		}
		for i, p := range pods.Items {
			for _, cs := range p.Status.ContainerStatuses {
				if cs.Ready {
					ready = &pods.Items[i]
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("no ready CoreDNS pod: %w", err)
	}
	return ready, nil
}
