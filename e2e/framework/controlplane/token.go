package controlplane

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// PodToken returns a token of the ServiceAccount namespace/serviceAccount bound to the pod
// with that name and UID, as a kubelet requests one for the pod: the API server puts the pod's
// node into it. An empty pod name: a token bound to no object, which names no node.
func (cp *ControlPlane) PodToken(ctx context.Context, namespace, serviceAccount, pod string, uid types.UID) (string, error) {
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if pod != "" {
		req.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod, UID: uid}
	}
	tr, err := cp.client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, serviceAccount, req, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("request a token of %s/%s: %w", namespace, serviceAccount, err)
	}
	return tr.Status.Token, nil
}

// TokenConfig returns the configuration of a client that authenticates with the token only.
func (cp *ControlPlane) TokenConfig(token string) *rest.Config {
	return &rest.Config{Host: cp.APIServerURL(), BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAFile: cp.CAFile()}}
}
