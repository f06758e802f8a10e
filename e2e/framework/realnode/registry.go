package realnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Registry is an in-memory OCI registry on HostAddress, which the node's containerd pulls
// from over plain HTTP: the images are pulled for real, and nothing leaves the machine.
type Registry struct {
	Host string // host:port
	srv  *http.Server
}

// StartRegistry serves a registry on HostAddress; call it once the network is up.
func StartRegistry() (*Registry, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(HostAddress, "0"))
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Printf("registry stopped: %v", err)
		}
	}()
	return &Registry{Host: ln.Addr().String(), srv: srv}, nil
}

// Push stores img as repo:tag and returns its reference.
func (r *Registry) Push(ctx context.Context, repo string, img v1.Image) (string, error) {
	ref, err := name.ParseReference(r.Host+"/"+repo, name.Insecure)
	if err != nil {
		return "", err
	}
	if err := remote.Write(ref, img, remote.WithContext(ctx)); err != nil {
		return "", fmt.Errorf("push %s: %w", ref, err)
	}
	return ref.String(), nil
}

// PushIndex stores idx as repo:tag and returns its reference.
func (r *Registry) PushIndex(ctx context.Context, repo string, idx v1.ImageIndex) (string, error) {
	ref, err := name.ParseReference(r.Host+"/"+repo, name.Insecure)
	if err != nil {
		return "", err
	}
	if err := remote.WriteIndex(ref, idx, remote.WithContext(ctx)); err != nil {
		return "", fmt.Errorf("push %s: %w", ref, err)
	}
	return ref.String(), nil
}

// Stop stops serving.
func (r *Registry) Stop() { _ = r.srv.Close() }
