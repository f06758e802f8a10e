package kubelet

import (
	"context"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// envInputs is what a container's environment is built from besides the pod spec: what the
// kubelet knows about the pod's sandbox, the node and the cluster.
type envInputs struct {
	podIP, hostIP string
	// serviceHost and servicePort are the address of the kubernetes Service, which the
	// kubelet puts into every pod.
	serviceHost, servicePort string
	// allocatable stands in for resource limits the container does not set.
	allocatable corev1.ResourceList
}

// containerEnv returns the environment of container c of pod as a kubelet builds it:
// envFrom sources first, in order, then env entries, which override them and may refer to
// earlier variables as $(NAME), then the kubernetes Service variables that the pod did not
// set itself.
func containerEnv(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, c *corev1.Container, in envInputs) (map[string]string, error) {
	src := &envSources{client: client, namespace: pod.Namespace, read: map[source]map[string]string{}}
	service := serviceEnv(in.serviceHost, in.servicePort)
	env := map[string]string{}

	for _, from := range c.EnvFrom {
		data, err := src.envFrom(ctx, from)
		if err != nil {
			return nil, err
		}
		for k, v := range data {
			env[from.Prefix+k] = v
		}
	}

	lookup := func(name string) (string, bool) {
		if v, ok := env[name]; ok {
			return v, true
		}
		v, ok := service[name]
		return v, ok
	}
	for _, e := range c.Env {
		switch {
		case e.Value != "":
			env[e.Name] = expand(e.Value, lookup)
		case e.ValueFrom == nil:
			env[e.Name] = ""
		default:
			v, ok, err := src.valueFrom(ctx, pod, c, e, in)
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
			if ok {
				env[e.Name] = v
			}
		}
	}

	for k, v := range service {
		if _, set := env[k]; !set {
			env[k] = v
		}
	}
	return env, nil
}

// serviceEnv returns the variables of the default/kubernetes Service, which a kubelet adds to
// every pod whatever enableServiceLinks says, because in-cluster clients find the API server
// through them.
func serviceEnv(host, port string) map[string]string {
	if host == "" {
		return nil
	}
	url := "tcp://" + net.JoinHostPort(host, port)
	prefix := "KUBERNETES_PORT_" + port + "_TCP"
	return map[string]string{
		"KUBERNETES_SERVICE_HOST":       host,
		"KUBERNETES_SERVICE_PORT":       port,
		"KUBERNETES_SERVICE_PORT_HTTPS": port,
		"KUBERNETES_PORT":               url,
		prefix:                          url,
		prefix + "_PROTO":               "tcp",
		prefix + "_PORT":                port,
		prefix + "_ADDR":                host,
	}
}

// envSources reads ConfigMaps and Secrets once per container start, as the kubelet's
// managers do.
type envSources struct {
	client    kubernetes.Interface
	namespace string
	read      map[source]map[string]string // a Secret's values as strings
}

// source is a ConfigMap or a Secret that an env entry or an envFrom names.
type source struct {
	kind string // ConfigMap or Secret
	name string
}

// envFrom returns the variables of one envFrom source, without the prefix. A missing
// optional source yields none.
func (s *envSources) envFrom(ctx context.Context, from corev1.EnvFromSource) (map[string]string, error) {
	var src source
	var optional *bool
	switch {
	case from.ConfigMapRef != nil:
		src, optional = source{"ConfigMap", from.ConfigMapRef.Name}, from.ConfigMapRef.Optional
	case from.SecretRef != nil:
		src, optional = source{"Secret", from.SecretRef.Name}, from.SecretRef.Optional
	default:
		return nil, fmt.Errorf("envFrom has neither configMapRef nor secretRef")
	}
	data, err := s.data(ctx, src)
	if apierrors.IsNotFound(err) && isTrue(optional) {
		return nil, nil
	}
	return data, err
}

// valueFrom resolves one env entry's source. ok is false when an optional source is missing,
// and the variable is then not set at all.
func (s *envSources) valueFrom(ctx context.Context, pod *corev1.Pod, c *corev1.Container, e corev1.EnvVar, in envInputs) (value string, ok bool, err error) {
	from := e.ValueFrom
	switch {
	case from.FieldRef != nil:
		v, err := fieldRefValue(pod, from.FieldRef.FieldPath, in)
		return v, err == nil, err
	case from.ResourceFieldRef != nil:
		v, err := resourceFieldRefValue(pod, c, from.ResourceFieldRef, in.allocatable)
		return v, err == nil, err
	case from.ConfigMapKeyRef != nil:
		ref := from.ConfigMapKeyRef
		return s.key(ctx, source{"ConfigMap", ref.Name}, ref.Key, ref.Optional)
	case from.SecretKeyRef != nil:
		ref := from.SecretKeyRef
		return s.key(ctx, source{"Secret", ref.Name}, ref.Key, ref.Optional)
	default:
		return "", false, fmt.Errorf("unsupported valueFrom source")
	}
}

// key returns the value of key in the source. ok is false when the source or the key is
// missing and optional.
func (s *envSources) key(ctx context.Context, src source, key string, optional *bool) (value string, ok bool, err error) {
	data, err := s.data(ctx, src)
	if err != nil {
		if apierrors.IsNotFound(err) && isTrue(optional) {
			return "", false, nil
		}
		return "", false, err
	}
	v, found := data[key]
	if !found && !isTrue(optional) {
		return "", false, fmt.Errorf("couldn't find key %s in %s %s/%s", key, src.kind, s.namespace, src.name)
	}
	return v, found, nil
}

// data returns the data of the source, a Secret's values as strings, read once.
func (s *envSources) data(ctx context.Context, src source) (map[string]string, error) {
	if data, ok := s.read[src]; ok {
		return data, nil
	}
	var data map[string]string
	var err error
	if src.kind == "ConfigMap" {
		var cm *corev1.ConfigMap
		if cm, err = s.client.CoreV1().ConfigMaps(s.namespace).Get(ctx, src.name, metav1.GetOptions{}); err == nil {
			data = cm.Data
		}
	} else {
		var secret *corev1.Secret
		if secret, err = s.client.CoreV1().Secrets(s.namespace).Get(ctx, src.name, metav1.GetOptions{}); err == nil {
			data = make(map[string]string, len(secret.Data))
			for k, v := range secret.Data {
				data[k] = string(v)
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("get %s %s/%s: %w", src.kind, s.namespace, src.name, err)
	}
	s.read[src] = data
	return data, nil
}

// fieldRefValue resolves a downward API field of the pod.
func fieldRefValue(pod *corev1.Pod, path string, in envInputs) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs":
		return in.podIP, nil
	case "status.hostIP", "status.hostIPs":
		return in.hostIP, nil
	}
	if key, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[key], nil
	}
	if key, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[key], nil
	}
	return "", fmt.Errorf("unsupported fieldRef %q", path)
}

// subscript parses field['key'].
func subscript(path, field string) (string, bool) {
	rest, ok := strings.CutPrefix(path, field+"['")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "']")
}

// resourceFieldRefValue renders a container resource as a kubelet does: CPU in units of the
// divisor (cores by default), memory and ephemeral storage in units of the divisor (bytes by
// default), each rounded up. An unset limit is the node's allocatable amount.
func resourceFieldRefValue(pod *corev1.Pod, c *corev1.Container, ref *corev1.ResourceFieldSelector, allocatable corev1.ResourceList) (string, error) {
	if ref.ContainerName != "" && ref.ContainerName != c.Name {
		found := false
		for i := range pod.Spec.Containers {
			if pod.Spec.Containers[i].Name == ref.ContainerName {
				c, found = &pod.Spec.Containers[i], true
				break
			}
		}
		if !found {
			return "", fmt.Errorf("container %s not found", ref.ContainerName)
		}
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}

	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", fmt.Errorf("unsupported container resource %q", ref.Resource)
	}
	list := c.Resources.Requests
	if kind == "limits" {
		list = c.Resources.Limits
	}
	q, set := list[corev1.ResourceName(name)]
	if kind == "limits" && (!set || q.IsZero()) {
		q = allocatable[corev1.ResourceName(name)]
	}

	switch corev1.ResourceName(name) {
	case corev1.ResourceCPU:
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	case corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
		return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
	default:
		return "", fmt.Errorf("unsupported container resource %q", ref.Resource)
	}
}

// expand replaces $(NAME) with the value of NAME, as the kubelet expands env values: an
// unknown name stays as written, $$ is a literal $, and an unterminated $( is kept.
func expand(s string, lookup func(string) (string, bool)) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString("$(")
				i++
				continue
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

func isTrue(b *bool) bool { return b != nil && *b }

// envList turns an environment into the KEY=value form of exec.Cmd.Env.
func envList(env map[string]string) []string {
	list := make([]string, 0, len(env))
	for k, v := range env {
		list = append(list, k+"="+v)
	}
	slices.Sort(list)
	return list
}
