package wiring

import (
	"errors"
	"fmt"
	"net"
	"os"

	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
)

// CAEnv holds the cluster's CA bundle in the agent's pod: the DaemonSet sets it from the
// kube-root-ca.crt ConfigMap (manifests/03-daemonset.yaml says why).
const CAEnv = "KUBE_ROOT_CA_CRT"

// TokenFile is where the DaemonSet's projected volume puts the pod's ServiceAccount token:
// where client-go's in-cluster configuration looks for it.
const TokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"

// inClusterConfig is rest.InClusterConfig with the CA given: the API server from the
// kubernetes Service's variables, the token re-read from tokenPath as the kubelet rotates it.
func inClusterConfig(tokenPath string, ca []byte) (*rest.Config, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, errors.New("in-cluster configuration: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set")
	}
	if _, err := certutil.NewPoolFromBytes(ca); err != nil {
		return nil, fmt.Errorf("in-cluster configuration: %s: %w", CAEnv, err)
	}
	token, err := os.ReadFile(tokenPath)
	if err != nil {
		return nil, fmt.Errorf("in-cluster configuration: %w", err)
	}
	return &rest.Config{
		Host:            "https://" + net.JoinHostPort(host, port),
		TLSClientConfig: rest.TLSClientConfig{CAData: ca},
		BearerToken:     string(token),
		BearerTokenFile: tokenPath,
	}, nil
}
