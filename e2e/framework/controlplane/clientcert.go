package controlplane

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
)

// WriteClientKubeconfig writes a kubeconfig at path that reaches the API server as user in
// groups, with a client certificate signed by the cluster CA: what a kubelet
// (system:node:NAME in system:nodes) or kube-proxy (system:kube-proxy) is given on a real node.
func (cp *ControlPlane) WriteClientKubeconfig(path, user string, groups ...string) error {
	kp, err := cp.pki.CA.issue(x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return fmt.Errorf("issue client certificate for %s: %w", user, err)
	}
	return writeKubeconfig(path, cp.APIServerURL(), cp.pki.CA, kp)
}
