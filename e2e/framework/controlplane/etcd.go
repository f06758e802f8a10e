package controlplane

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
)

func (cp *ControlPlane) etcdArgs() []string {
	client := "http://" + hostPort(cp.etcdPort)
	peer := "http://" + hostPort(cp.etcdPeerPort)
	return []string{
		"--name=nodeready-e2e",
		"--data-dir=" + filepath.Join(cp.workDir, "etcd"),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=nodeready-e2e=" + peer,
		// Throwaway data: skipping fsync keeps a slow disk from making the API server slow.
		"--unsafe-no-fsync",
		"--log-level=warn",
	}
}

func (cp *ControlPlane) startEtcd(ctx context.Context) error {
	p, err := cp.startComponent("etcd", cp.etcdArgs())
	if err != nil {
		return err
	}
	cp.etcd = p
	url := "http://" + hostPort(cp.etcdPort) + "/health"
	return waitHTTPOK(ctx, p, http.DefaultClient, url, etcdStartTimeout)
}

func (cp *ControlPlane) etcdURL() string { return fmt.Sprintf("http://%s", hostPort(cp.etcdPort)) }
