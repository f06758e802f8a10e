// Package wiring builds what main hands the agent: the root logger and the
// Kubernetes clients. The scale benchmark (e2e/cmd/bench) builds its
// in-process agents with it, as main does. wiring/sigterm, which main
// imports first, catches the signals.
package wiring

import (
	"crypto/tls"
	"net"
	"net/url"
	"os"
	"path/filepath"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodeready/nodeready/agent"
	"github.com/nodeready/nodeready/checks"
	"github.com/nodeready/nodeready/internal/kube"
)

// NewClients builds the agent's clients from cfg: the typed clients of internal/kube,
// which prefer protobuf for the built-in types as client-go's generated clients do.
func NewClients(cfg *rest.Config) (agent.Clients, error) {
	typed, err := kube.NewForConfig(cfg)
	if err != nil {
		return agent.Clients{}, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return agent.Clients{}, err
	}
	api, err := apiServer(cfg)
	if err != nil {
		return agent.Clients{}, err
	}
	return agent.Clients{Kube: typed, Dynamic: dyn, APIServer: api}, nil
}

// apiServer is the API server as cfg reaches it: the host:port of its Host, a
// URL or host[:port], with the port of its scheme when it names none, and,
// unless the scheme is http, the TLS configuration client-go uses with it
// (the system's roots when cfg names no CA).
func apiServer(cfg *rest.Config) (checks.APIServerEndpoint, error) {
	u, err := url.Parse(cfg.Host)
	if err != nil || u.Host == "" {
		u, err = url.Parse("https://" + cfg.Host)
		if err != nil {
			return checks.APIServerEndpoint{}, nil
		}
	}
	if u.Scheme == "http" {
		return checks.APIServerEndpoint{Addr: withPort(u, "80")}, nil
	}
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return checks.APIServerEndpoint{}, err
	}
	if tlsConfig == nil {
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return checks.APIServerEndpoint{Addr: withPort(u, "443"), TLS: tlsConfig}, nil
}

// withPort is u's host:port, with port when u names none.
func withPort(u *url.URL, port string) string {
	if u.Port() != "" {
		return u.Host
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// RestConfig uses KUBECONFIG when it is set (the e2e harness runs the binary
// outside a container) and the in-cluster configuration otherwise: with the CA
// from CAEnv in the agent's pod, whose DaemonSet mounts the token alone, without
// the ConfigMap the kubelet can mount only once the node's network is ready, and
// passes the CA as a variable, which the kubelet resolves when it starts the
// container (manifests/03-daemonset.yaml, volume api-token). In
// dry-run it also tries ~/.kube/config and returns nil when there is no
// configuration at all, so the API checks are skipped, not failed.
func RestConfig(dryRun bool) (*rest.Config, error) {
	if path := os.Getenv("KUBECONFIG"); path != "" {
		return clientcmd.BuildConfigFromFlags("", path)
	}
	if ca := os.Getenv(CAEnv); ca != "" {
		return inClusterConfig(TokenFile, []byte(ca))
	}
	if !dryRun {
		return rest.InClusterConfig()
	}
	if home, err := os.UserHomeDir(); err == nil {
		path := filepath.Join(home, ".kube", "config")
		if _, err := os.Stat(path); err == nil {
			return clientcmd.BuildConfigFromFlags("", path)
		}
	}
	if cfg, err := rest.InClusterConfig(); err == nil {
		return cfg, nil
	}
	return nil, nil
}
