package kubelet

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func TestContainerEnv(t *testing.T) {
	client := fake.NewClientset(
		&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "config", Namespace: "kube-system"},
			Data:       map[string]string{"LOG_LEVEL": "debug", "METRICS_PORT": "8080", "KUBERNETES_SERVICE_PORT": "9443"},
		},
		&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "kube-system"},
			Data:       map[string]string{"LEVEL": "warn"},
		},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "secret", Namespace: "kube-system"},
			Data:       map[string][]byte{"TOKEN": []byte("s3cret")},
		},
	)
	in := envInputs{
		podIP: "10.244.1.5", hostIP: "192.168.0.7",
		serviceHost: "10.96.0.1", servicePort: "443",
		allocatable: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("4"),
			corev1.ResourceMemory: resource.MustParse("16Gi"),
		},
	}
	tests := []struct {
		name    string
		from    []corev1.EnvFromSource
		env     []corev1.EnvVar
		want    map[string]string
		absent  []string
		wantErr string
	}{
		{
			name: "envFrom ConfigMap, env overrides it",
			from: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: ref("config")}}},
			env:  []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "trace"}},
			want: map[string]string{"LOG_LEVEL": "trace", "METRICS_PORT": "8080"},
		},
		{
			name: "prefix, and later sources override earlier ones",
			from: []corev1.EnvFromSource{
				{Prefix: "APP_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: ref("other")}},
				{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: ref("config")}},
				{Prefix: "LOG_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: ref("other")}},
			},
			want:   map[string]string{"APP_LEVEL": "warn", "LOG_LEVEL": "warn"},
			absent: []string{"LEVEL"},
		},
		{
			name: "missing optional ConfigMap is skipped",
			from: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: ref("missing"), Optional: ptr.To(true)}}},
			want: map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1"},
		},
		{
			name:    "missing ConfigMap fails the start",
			from:    []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: ref("missing")}}},
			wantErr: `get ConfigMap kube-system/missing: configmaps "missing" not found`,
		},
		{
			name: "envFrom Secret",
			from: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: ref("secret")}}},
			want: map[string]string{"TOKEN": "s3cret"},
		},
		{
			name: "downward API fields",
			env: []corev1.EnvVar{
				fieldRef("NODE_NAME", "spec.nodeName"),
				fieldRef("POD_NAME", "metadata.name"),
				fieldRef("POD_NAMESPACE", "metadata.namespace"),
				fieldRef("POD_UID", "metadata.uid"),
				fieldRef("SA", "spec.serviceAccountName"),
				fieldRef("POD_IP", "status.podIP"),
				fieldRef("HOST_IP", "status.hostIP"),
				fieldRef("APP", "metadata.labels['app.kubernetes.io/name']"),
			},
			want: map[string]string{
				"NODE_NAME": "node-a", "POD_NAME": "nodeready-x7k2p", "POD_NAMESPACE": "kube-system",
				"POD_UID": "0b5e7c9e-1c51-4c55-9d57-1f9e0d7a8a11", "SA": "nodeready",
				"POD_IP": "10.244.1.5", "HOST_IP": "192.168.0.7", "APP": "nodeready",
			},
		},
		{
			name:    "unknown field fails the start",
			env:     []corev1.EnvVar{fieldRef("X", "spec.hostNetwork")},
			wantErr: `env X: unsupported fieldRef "spec.hostNetwork"`,
		},
		{
			name: "key refs, a missing optional key leaves the variable unset",
			env: []corev1.EnvVar{
				{Name: "LEVEL", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: ref("config"), Key: "LOG_LEVEL"}}},
				{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: ref("secret"), Key: "TOKEN"}}},
				{Name: "NOPE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: ref("config"), Key: "NOPE", Optional: ptr.To(true)}}},
			},
			want:   map[string]string{"LEVEL": "debug", "TOKEN": "s3cret"},
			absent: []string{"NOPE"},
		},
		{
			name:    "missing key fails the start",
			env:     []corev1.EnvVar{{Name: "NOPE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: ref("config"), Key: "NOPE"}}}},
			wantErr: "env NOPE: couldn't find key NOPE in ConfigMap kube-system/config",
		},
		{
			name: "$(VAR) expands declared and service variables",
			from: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: ref("config")}}},
			env: []corev1.EnvVar{
				{Name: "ADDR", Value: "127.0.0.1:$(METRICS_PORT)"},
				{Name: "API", Value: "https://$(KUBERNETES_SERVICE_HOST)"},
				{Name: "LITERAL", Value: "$$(METRICS_PORT) $(UNKNOWN) $(OPEN"},
				{Name: "EMPTY"},
			},
			want: map[string]string{
				"ADDR": "127.0.0.1:8080", "API": "https://10.96.0.1",
				"LITERAL": "$(METRICS_PORT) $(UNKNOWN) $(OPEN", "EMPTY": "",
			},
		},
		{
			name: "kubernetes Service variables, unless the pod sets them",
			from: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: ref("config")}}},
			want: map[string]string{
				"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "9443",
				"KUBERNETES_SERVICE_PORT_HTTPS": "443", "KUBERNETES_PORT": "tcp://10.96.0.1:443",
				"KUBERNETES_PORT_443_TCP_ADDR": "10.96.0.1",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := agentPod()
			c := &pod.Spec.Containers[0]
			c.EnvFrom, c.Env = tt.from, tt.env

			env, err := containerEnv(t.Context(), client, pod, c, in)

			if tt.wantErr != "" {
				assert.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			for k, v := range tt.want {
				if assert.Contains(t, env, k) {
					assert.Equal(t, v, env[k], k)
				}
			}
			for _, k := range tt.absent {
				assert.NotContains(t, env, k)
			}
		})
	}
}

// TestResourceFieldRef follows the kubelet's rendering: CPU in whole divisor units rounded
// up (cores by default), memory in bytes or divisor units rounded up, and an unset limit is
// the node's allocatable amount.
func TestResourceFieldRef(t *testing.T) {
	allocatable := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("4"),
		corev1.ResourceMemory: resource.MustParse("16Gi"),
	}
	tests := []struct {
		name      string
		resources *corev1.ResourceRequirements // nil: the agent's requests and limits
		ref       corev1.ResourceFieldSelector
		want      string
		wantErr   string
	}{
		{name: "limits.memory in bytes", ref: resField("limits.memory", ""), want: "67108864"},
		{name: "requests.memory in Mi", ref: resField("requests.memory", "1Mi"), want: "32"},
		{name: "limits.cpu 100m rounds up to 1 core", ref: resField("limits.cpu", ""), want: "1"},
		{name: "limits.cpu in millicores", ref: resField("limits.cpu", "1m"), want: "100"},
		{name: "requests.cpu 10m rounds up to 1 core", ref: resField("requests.cpu", ""), want: "1"},
		{
			name:      "1500m rounds up to 2 cores",
			resources: &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}},
			ref:       resField("limits.cpu", ""), want: "2",
		},
		{
			name:      "memory rounds up to the divisor",
			resources: &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1500Ki")}},
			ref:       resField("limits.memory", "1Mi"), want: "2",
		},
		{
			name:      "unset limits are the node's allocatable",
			resources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")}},
			ref:       resField("limits.memory", ""), want: "17179869184",
		},
		{
			name:      "unset cpu limit is the node's allocatable",
			resources: &corev1.ResourceRequirements{},
			ref:       resField("limits.cpu", ""), want: "4",
		},
		{
			name:      "unset request is 0",
			resources: &corev1.ResourceRequirements{},
			ref:       resField("requests.memory", ""), want: "0",
		},
		{name: "unsupported resource", ref: resField("limits.nvidia.com/gpu", ""), wantErr: `unsupported container resource "limits.nvidia.com/gpu"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := agentPod()
			c := &pod.Spec.Containers[0]
			if tt.resources != nil {
				c.Resources = *tt.resources
			}

			got, err := resourceFieldRefValue(pod, c, &tt.ref, allocatable)

			if tt.wantErr != "" {
				assert.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestResourceFieldRefOfNamedContainer(t *testing.T) {
	pod := agentPod()
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{
		Name:      "sidecar",
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}},
	})
	ref := resField("limits.memory", "1Mi")
	ref.ContainerName = "sidecar"

	got, err := resourceFieldRefValue(pod, &pod.Spec.Containers[0], &ref, nil)

	require.NoError(t, err)
	assert.Equal(t, "1024", got)
}

// agentPod is shaped like a pod of manifests/03-daemonset.yaml.
func agentPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "nodeready-x7k2p", Namespace: "kube-system", UID: "0b5e7c9e-1c51-4c55-9d57-1f9e0d7a8a11",
			Labels: map[string]string{"app.kubernetes.io/name": "nodeready"},
		},
		Spec: corev1.PodSpec{
			NodeName:           "node-a",
			ServiceAccountName: "nodeready",
			Containers: []corev1.Container{{
				Name:  "nodeready",
				Image: "ghcr.io/nodeready/nodeready:v0.1.0",
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
				},
			}},
		},
	}
}

func ref(name string) corev1.LocalObjectReference { return corev1.LocalObjectReference{Name: name} }

func fieldRef(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}

func resField(res, divisor string) corev1.ResourceFieldSelector {
	s := corev1.ResourceFieldSelector{Resource: res}
	if divisor != "" {
		s.Divisor = resource.MustParse(divisor)
	}
	return s
}
