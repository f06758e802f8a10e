package checks

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nodeready/nodeready/internal/envvar"
	"github.com/nodeready/nodeready/internal/kube"
)

var _ Check = (*APIServer)(nil)

// APIServer modes.
const (
	// APIServerReadyz GETs /readyz: the API server is reachable from the node
	// and says it is ready.
	APIServerReadyz = "readyz"
	// APIServerNode GETs the agent's own Node: the path to the API server
	// works, and so do authentication and the agent's RBAC.
	APIServerNode = "node"
)

// APIServerModes lists the accepted modes, the default first, for config
// validation and its messages.
var APIServerModes = []string{APIServerReadyz, APIServerNode}

// APIServer passes when the API server answers a request made with the
// agent's own client.
type APIServer struct {
	client   kube.Interface
	mode     string
	nodeName string
}

// NewAPIServer returns an API server check. mode is one of APIServerModes
// (empty means "readyz"); nodeName is used by mode "node" only.
func NewAPIServer(client kube.Interface, mode string, nodeName string) *APIServer {
	if mode == "" {
		mode = APIServerReadyz
	}
	return &APIServer{client: client, mode: mode, nodeName: nodeName}
}

// Name implements Check.
func (c *APIServer) Name() string { return string(NameAPIServer) }

// Target implements Check.
func (c *APIServer) Target() string {
	switch c.mode {
	case APIServerReadyz:
		return "/readyz"
	case APIServerNode:
		return "node/" + c.nodeName
	default:
		return c.mode
	}
}

// Run implements Check.
func (c *APIServer) Run(ctx context.Context) error {
	switch c.mode {
	case APIServerReadyz:
		return c.readyz(ctx)
	case APIServerNode:
		return c.node(ctx)
	default:
		return fmt.Errorf("unknown apiserver mode %q, want one of %s", c.mode, strings.Join(APIServerModes, ", "))
	}
}

func (c *APIServer) readyz(ctx context.Context) error {
	rc := c.client.Discovery().RESTClient()
	if rc == nil {
		// The fake clientset has no REST client.
		return errors.New("get /readyz: client has no REST client")
	}
	// Error, unlike Raw, decodes a Status body into the server's own message.
	if err := rc.Get().AbsPath("/readyz").Do(ctx).Error(); err != nil {
		return fmt.Errorf("get /readyz: %w", apiError(err))
	}
	return nil
}

func (c *APIServer) node(ctx context.Context) error {
	_, err := getNode(ctx, c.client, c.nodeName)
	return err
}

// APIServerOptions are the apiserver check's variables.
type APIServerOptions struct {
	Probe string `envconfig:"APISERVER_PROBE" default:"readyz" desc:"apiserver: readyz (GET /readyz) or node (GET the own Node)"`
}

// Validate implements KindOptions.
func (o *APIServerOptions) Validate(*Options, Use) error {
	return envvar.OneOf("APISERVER_PROBE", o.Probe, APIServerModes)
}

// Checks implements KindOptions.
func (o *APIServerOptions) Checks(_ *Options, env Env) []Check {
	switch {
	case env.Client == nil:
		return []Check{Skip(NameAPIServer, "-", noKubeconfig)}
	case o.Probe == APIServerNode && env.Node == "":
		return []Check{Skip(NameAPIServer, "node/-", "NODE_NAME is not set")}
	}
	return []Check{NewAPIServer(env.Client, o.Probe, env.Node)}
}
