package controlplane

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// FrontProxyClientName is the common name of the API server's aggregation layer client.
const FrontProxyClientName = "front-proxy-client"

// certValidity is long enough for any test run and short enough to be obviously throwaway.
const certValidity = 24 * time.Hour

// keyPair is a certificate and its private key, both PEM-encoded, and where they are on disk.
type keyPair struct {
	CertPEM, KeyPEM   []byte
	CertFile, KeyFile string

	cert *x509.Certificate
	key  crypto.Signer
}

// pki holds every certificate and key of one control plane.
type pki struct {
	CA         *keyPair
	APIServer  *keyPair // serving: 127.0.0.1, localhost and the in-cluster names
	KCMServing *keyPair
	SchServing *keyPair
	Admin      *keyPair // O=system:masters
	KCM        *keyPair // CN=system:kube-controller-manager
	Scheduler  *keyPair // CN=system:kube-scheduler

	FrontProxyCA     *keyPair
	FrontProxyClient *keyPair // CN=FrontProxyClientName

	// ServiceAccountKeyFile and ServiceAccountPubFile sign and verify ServiceAccount tokens.
	ServiceAccountKeyFile, ServiceAccountPubFile string
}

// newPKI creates every certificate; apiServerIP, when not loopback, is added to the API
// server's serving certificate.
func newPKI(dir string, apiServerIP net.IP) (*pki, error) {
	ca, err := newCA("nodeready-e2e-ca")
	if err != nil {
		return nil, fmt.Errorf("create CA: %w", err)
	}
	if err := ca.write(dir, "ca"); err != nil {
		return nil, err
	}
	p := &pki{CA: ca}
	if err := p.writeFrontProxy(dir); err != nil {
		return nil, err
	}

	loopback := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	apiServerIPs := append(loopback, net.IPv4(10, 96, 0, 1))
	if apiServerIP != nil && !apiServerIP.IsLoopback() {
		apiServerIPs = append(apiServerIPs, apiServerIP)
	}
	servers := []struct {
		name  string
		dns   []string
		ips   []net.IP
		field **keyPair
	}{
		{"kube-apiserver", []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}, apiServerIPs, &p.APIServer},
		{"kube-controller-manager", []string{"localhost"}, loopback, &p.KCMServing},
		{"kube-scheduler", []string{"localhost"}, loopback, &p.SchServing},
	}
	for _, s := range servers {
		kp, err := ca.issue(x509.Certificate{
			Subject:     pkix.Name{CommonName: s.name},
			DNSNames:    s.dns,
			IPAddresses: s.ips,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		})
		if err != nil {
			return nil, fmt.Errorf("issue %s serving certificate: %w", s.name, err)
		}
		if err := kp.write(dir, s.name+"-serving"); err != nil {
			return nil, err
		}
		*s.field = kp
	}

	clients := []struct {
		file  string
		subj  pkix.Name
		field **keyPair
	}{
		{"admin", pkix.Name{CommonName: "kubernetes-admin", Organization: []string{"system:masters"}}, &p.Admin},
		{"kube-controller-manager", pkix.Name{CommonName: "system:kube-controller-manager"}, &p.KCM},
		{"kube-scheduler", pkix.Name{CommonName: "system:kube-scheduler"}, &p.Scheduler},
	}
	for _, c := range clients {
		kp, err := ca.issue(x509.Certificate{
			Subject:     c.subj,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		})
		if err != nil {
			return nil, fmt.Errorf("issue %s client certificate: %w", c.file, err)
		}
		if err := kp.write(dir, c.file+"-client"); err != nil {
			return nil, err
		}
		*c.field = kp
	}

	if err := p.writeServiceAccountKeys(dir); err != nil {
		return nil, err
	}
	return p, nil
}

// writeFrontProxy creates the aggregation layer's CA and the client certificate the API
// server presents to extension API servers, as kubeadm does. Without them kube-controller-manager
// and kube-scheduler log errors about the missing request header CA.
func (p *pki) writeFrontProxy(dir string) error {
	ca, err := newCA("nodeready-e2e-front-proxy-ca")
	if err != nil {
		return fmt.Errorf("create front proxy CA: %w", err)
	}
	if err := ca.write(dir, "front-proxy-ca"); err != nil {
		return err
	}
	client, err := ca.issue(x509.Certificate{
		Subject:     pkix.Name{CommonName: FrontProxyClientName},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return fmt.Errorf("issue front proxy client certificate: %w", err)
	}
	if err := client.write(dir, "front-proxy-client"); err != nil {
		return err
	}
	p.FrontProxyCA, p.FrontProxyClient = ca, client
	return nil
}

func newCA(commonName string) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	return newKeyPair(der, key)
}

// issue signs a leaf certificate for tmpl's subject, names and usages with a fresh key.
func (ca *keyPair) issue(tmpl x509.Certificate) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(certValidity)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, err
	}
	return newKeyPair(der, key)
}

func newKeyPair(der []byte, key *ecdsa.PrivateKey) (*keyPair, error) {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &keyPair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		cert:    cert,
		key:     key,
	}, nil
}

func (kp *keyPair) write(dir, name string) error {
	kp.CertFile = filepath.Join(dir, name+".crt")
	kp.KeyFile = filepath.Join(dir, name+".key")
	if err := os.WriteFile(kp.CertFile, kp.CertPEM, 0o644); err != nil {
		return fmt.Errorf("write %s certificate: %w", name, err)
	}
	if err := os.WriteFile(kp.KeyFile, kp.KeyPEM, 0o600); err != nil {
		return fmt.Errorf("write %s key: %w", name, err)
	}
	return nil
}

// writeServiceAccountKeys writes the key pair that signs ServiceAccount tokens (ES256).
func (p *pki) writeServiceAccountKeys(dir string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate service account key: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("encode service account key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return fmt.Errorf("encode service account public key: %w", err)
	}
	p.ServiceAccountKeyFile = filepath.Join(dir, "sa.key")
	p.ServiceAccountPubFile = filepath.Join(dir, "sa.pub")
	if err := os.WriteFile(p.ServiceAccountKeyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return fmt.Errorf("write service account key: %w", err)
	}
	if err := os.WriteFile(p.ServiceAccountPubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644); err != nil {
		return fmt.Errorf("write service account public key: %w", err)
	}
	return nil
}
