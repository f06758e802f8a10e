package kubelet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// tokenExpirationSeconds is what a kubelet asks for a projected ServiceAccount token. The
// simulated pods live for minutes, so the token is never refreshed.
const tokenExpirationSeconds = 3607

// writeCredentials writes a kubeconfig for the pod's ServiceAccount into dir and returns its
// path, or "" when the pod has no token. The token comes from the TokenRequest API and is
// bound to the pod, as the projected token a kubelet mounts: the API server puts the pod's
// node into it, and it dies with the pod. A pod that opts out of the automatic token gets one
// only from a projected volume's serviceAccountToken source (the agent's DaemonSet has one),
// with that source's expiry and audience.
func (k *Kubelet) writeCredentials(ctx context.Context, pod *corev1.Pod, dir string) (string, error) {
	spec := authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](tokenExpirationSeconds)}
	if pod.Spec.AutomountServiceAccountToken != nil && !*pod.Spec.AutomountServiceAccountToken {
		src := projectedToken(pod)
		if src == nil {
			return "", nil
		}
		if src.ExpirationSeconds != nil {
			spec.ExpirationSeconds = src.ExpirationSeconds
		}
		if src.Audience != "" {
			spec.Audiences = []string{src.Audience}
		}
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	tr, err := k.client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("request token for ServiceAccount %s/%s: %w", pod.Namespace, sa, err)
	}

	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(tr.Status.Token), 0o600); err != nil {
		return "", fmt.Errorf("write token: %w", err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cluster"] = &clientcmdapi.Cluster{Server: k.opts.APIServerURL, CertificateAuthority: k.opts.CAFile}
	cfg.AuthInfos["pod"] = &clientcmdapi.AuthInfo{TokenFile: tokenFile}
	cfg.Contexts["pod"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "pod"}
	cfg.CurrentContext = "pod"
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", fmt.Errorf("write kubeconfig: %w", err)
	}
	return path, nil
}

// projectedToken is the pod's first projected serviceAccountToken source, or nil.
func projectedToken(pod *corev1.Pod) *corev1.ServiceAccountTokenProjection {
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if src.ServiceAccountToken != nil {
				return src.ServiceAccountToken
			}
		}
	}
	return nil
}
