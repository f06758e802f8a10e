package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeready/nodeready/e2e/framework/process"
)

const (
	pollInterval   = 250 * time.Millisecond
	requestTimeout = 5 * time.Second
)

// poll calls check until it returns nil, a watched process exits or timeout passes. The
// error names the last failed check, which usually says what is wrong.
func poll(ctx context.Context, timeout time.Duration, watch []*process.Process, check func(context.Context) error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		for _, p := range watch {
			if err := p.ExitError(); err != nil {
				return false, err
			}
		}
		ctx, cancel := context.WithTimeout(ctx, requestTimeout)
		defer cancel()
		last = check(ctx)
		return last == nil, nil
	})
	if err != nil && last != nil && wait.Interrupted(err) {
		return fmt.Errorf("%w (last check: %w)", err, last)
	}
	return err
}

// waitHTTPOK waits until url answers 200 OK.
func waitHTTPOK(ctx context.Context, p *process.Process, client *http.Client, url string, timeout time.Duration) error {
	return poll(ctx, timeout, []*process.Process{p}, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
		}
		return nil
	})
}

// waitAPIServerReady waits until /readyz passes, which includes etcd and every post-start hook
// (RBAC bootstrap roles, priority levels, the system namespaces).
func (cp *ControlPlane) waitAPIServerReady(ctx context.Context, p *process.Process) error {
	return poll(ctx, apiServerStartTimeout, []*process.Process{p, cp.etcd}, func(ctx context.Context) error {
		body, err := cp.client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("GET /readyz: %w: %s", err, body)
		}
		return nil
	})
}

// waitControllerManager waits for the default ServiceAccount of the default namespace, which
// the controller manager creates once its controllers run.
func (cp *ControlPlane) waitControllerManager(ctx context.Context) error {
	return poll(ctx, controllersTimeout, []*process.Process{cp.kcm, cp.apiServer, cp.etcd}, func(ctx context.Context) error {
		_, err := cp.client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("ServiceAccount default/default not created yet: %w", err)
		}
		return err
	})
}

// waitScheduler waits for the scheduler's /readyz, which passes once its informers have
// synced and its event handlers are registered.
func (cp *ControlPlane) waitScheduler(ctx context.Context) error {
	client, err := cp.componentHTTPClient()
	if err != nil {
		return err
	}
	return waitHTTPOK(ctx, cp.scheduler, client, "https://"+hostPort(cp.schedulerPort)+"/readyz", controllersTimeout)
}

// componentHTTPClient trusts the cluster CA and authenticates as the admin.
func (cp *ControlPlane) componentHTTPClient() (*http.Client, error) {
	cert, err := tls.X509KeyPair(cp.pki.Admin.CertPEM, cp.pki.Admin.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("load admin key pair: %w", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(cp.pki.CA.cert)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs:      roots,
		Certificates: []tls.Certificate{cert},
	}}}, nil
}
