package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nodeready/nodeready/e2e/framework/process"
)

// ServiceClusterIPRange is the Service CIDR of the control plane.
const ServiceClusterIPRange = "10.96.0.0/16"

func (cp *ControlPlane) apiServerArgs() []string {
	p := cp.pki
	args := []string{
		"--etcd-servers=" + cp.etcdURL(),
		"--bind-address=" + cp.apiServerHost(),
		"--secure-port=" + strconv.Itoa(cp.apiServerPort),
		// Without this flag the API server would advertise the host's outward address, where
		// nothing listens.
		"--advertise-address=" + cp.apiServerHost(),
		"--cert-dir=" + filepath.Join(cp.workDir, "kube-apiserver"),
		"--tls-cert-file=" + p.APIServer.CertFile,
		"--tls-private-key-file=" + p.APIServer.KeyFile,
		"--client-ca-file=" + p.CA.CertFile,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p.ServiceAccountPubFile,
		"--service-account-signing-key-file=" + p.ServiceAccountKeyFile,
		"--service-cluster-ip-range=" + ServiceClusterIPRange,
		"--authorization-mode=Node,RBAC",
		// The default plugins (including ValidatingAdmissionPolicy and, GA since 1.36,
		// MutatingAdmissionPolicy) stay on; NodeRestriction is off by default but on in every
		// real cluster.
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		// The aggregation layer, configured as kubeadm does.
		"--requestheader-client-ca-file=" + p.FrontProxyCA.CertFile,
		"--requestheader-allowed-names=" + FrontProxyClientName,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + p.FrontProxyClient.CertFile,
		"--proxy-client-key-file=" + p.FrontProxyClient.KeyFile,
	}
	if ip := net.ParseIP(cp.apiServerHost()); ip != nil && ip.IsLoopback() {
		// The endpoint reconciler rejects a loopback address: up to 1.36 it wrote no endpoints
		// for default/kubernetes, from 1.37 kube-apiserver refuses to start ("may not be in the
		// loopback range"). Turned off, default/kubernetes has no endpoints on both.
		args = append(args, "--endpoint-reconciler-type=none")
	}
	return append(args, cp.opts.APIServerArgs...)
}

// StartAPIServer starts kube-apiserver on its port and waits until /readyz passes.
func (cp *ControlPlane) StartAPIServer(ctx context.Context) error {
	p, err := cp.launchAPIServer()
	if err != nil {
		return fmt.Errorf("start kube-apiserver: %w", err)
	}
	// Wait without the lock, so that Stop can end a start that never becomes ready.
	if err := cp.waitAPIServerReady(ctx, p); err != nil {
		return fmt.Errorf("start kube-apiserver: %w", err)
	}
	return nil
}

func (cp *ControlPlane) launchAPIServer() (*process.Process, error) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.stopped {
		return nil, errStopped
	}
	if cp.apiServer != nil {
		if !cp.apiServer.Exited() {
			return nil, errors.New("already running")
		}
	}
	p, err := cp.startComponent("kube-apiserver", cp.apiServerArgs())
	if err != nil {
		return nil, err
	}
	cp.apiServer = p
	return p, nil
}

// StopAPIServer stops kube-apiserver with SIGTERM, as on a control plane upgrade: it stops
// listening at once. It is killed if it has not exited within a few seconds. The other
// components keep running.
func (cp *ControlPlane) StopAPIServer() error {
	cp.mu.Lock()
	p, stopped := cp.apiServer, cp.stopped
	cp.mu.Unlock()
	if stopped {
		return errStopped
	}
	if p == nil {
		return errors.New("stop kube-apiserver: not started")
	}
	p.Stop(stopGrace, nil)
	return nil
}

// RestartAPIServer stops kube-apiserver, keeps it down for the given time, then starts it
// again on the same port and waits until it is ready.
func (cp *ControlPlane) RestartAPIServer(ctx context.Context, down time.Duration) error {
	if err := cp.StopAPIServer(); err != nil {
		return fmt.Errorf("restart kube-apiserver: %w", err)
	}
	t := time.NewTimer(down)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("restart kube-apiserver: %w", ctx.Err())
	case <-t.C:
	}
	if err := cp.StartAPIServer(ctx); err != nil {
		return fmt.Errorf("restart kube-apiserver: %w", err)
	}
	return nil
}
