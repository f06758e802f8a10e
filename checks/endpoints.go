package checks

import (
	"context"
	"fmt"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeready/nodeready/internal/envvar"
	"github.com/nodeready/nodeready/internal/kube"
)

var _ Check = (*Endpoints)(nil)

// Endpoints passes when a Service has at least one ready endpoint in its
// discovery.k8s.io/v1 EndpointSlices.
//
// With connect set it also opens a TCP connection to one ready endpoint
// directly, by pod IP. A DNS, TCP or HTTP check against the Service address
// goes through service routing (kube-proxy, IPVS or eBPF rules on this node)
// and passes as soon as any path works; the direct connection proves that
// this node's pod network reaches a backend, which service routing depends on
// but can hide.
type Endpoints struct {
	client    kube.Interface
	namespace string
	service   string
	connect   bool
	dialer    *net.Dialer
}

// NewEndpoints returns a check of the Service namespace/service. With connect
// it dials a ready endpoint with d (a zero net.Dialer when nil).
func NewEndpoints(client kube.Interface, namespace, service string, connect bool, d *net.Dialer) *Endpoints {
	if d == nil {
		d = &net.Dialer{}
	}
	return &Endpoints{client: client, namespace: namespace, service: service, connect: connect, dialer: d}
}

// Name implements Check.
func (c *Endpoints) Name() string { return string(NameEndpoints) }

// Target implements Check.
func (c *Endpoints) Target() string { return c.namespace + "/" + c.service }

// Run implements Check.
func (c *Endpoints) Run(ctx context.Context) error {
	// ResourceVersion "0" is served from the API server's watch cache. A
	// consistent list first waits for that cache to catch up with etcd, which
	// in a burst of new nodes made it the slowest request of a verification;
	// a list a few milliseconds old is as good for a readiness check, and a
	// failed check is read again in the next round.
	slices, err := c.client.DiscoveryV1().EndpointSlices(c.namespace).List(ctx, metav1.ListOptions{
		LabelSelector:   labels.Set{discoveryv1.LabelServiceName: c.service}.String(),
		ResourceVersion: "0",
	})
	if err != nil {
		return fmt.Errorf("list EndpointSlices of %s: %w", c.Target(), apiError(err))
	}
	if len(slices.Items) == 0 {
		return Misconfiguration(fmt.Errorf("no EndpointSlices for %s", c.Target()))
	}
	ready, addr := false, ""
	for i := range slices.Items {
		a, ok := readyAddress(&slices.Items[i])
		ready = ready || ok
		if a != "" {
			addr = a
			break
		}
	}
	if !ready {
		noun := "EndpointSlices"
		if len(slices.Items) == 1 {
			noun = "EndpointSlice"
		}
		return Misconfiguration(fmt.Errorf("no ready endpoints in %d %s of %s", len(slices.Items), noun, c.Target()))
	}
	if !c.connect {
		return nil
	}
	if addr == "" {
		return Misconfiguration(fmt.Errorf("connect to a ready endpoint of %s: no ready endpoint with a TCP port", c.Target()))
	}
	conn, err := dialTCP(ctx, c.dialer, addr)
	if err != nil {
		return fmt.Errorf("connect to endpoint of %s: %w", c.Target(), err)
	}
	return conn.Close()
}

// readyAddress reports whether the slice has a ready endpoint and returns
// "host:port" of the first one on the slice's first TCP port, or "" when the
// slice has no TCP port. The first TCP port rather than the first port,
// because a Service like kube-dns lists UDP 53 first. A nil Ready condition
// counts as ready, as the API documents.
func readyAddress(s *discoveryv1.EndpointSlice) (string, bool) {
	port := ""
	for _, p := range s.Ports {
		if p.Port != nil && (p.Protocol == nil || *p.Protocol == corev1.ProtocolTCP) {
			port = strconv.Itoa(int(*p.Port))
			break
		}
	}
	for _, ep := range s.Endpoints {
		if len(ep.Addresses) == 0 || (ep.Conditions.Ready != nil && !*ep.Conditions.Ready) {
			continue
		}
		if port == "" {
			return "", true
		}
		return net.JoinHostPort(ep.Addresses[0], port), true
	}
	return "", false
}

// EndpointsOptions are the endpoints check's variables.
type EndpointsOptions struct {
	Service string `envconfig:"ENDPOINTS_SERVICE" default:"default/kubernetes" desc:"endpoints: namespace/name of the Service whose EndpointSlices must have a ready endpoint"`
	Connect bool   `envconfig:"ENDPOINTS_CONNECT" default:"true" desc:"endpoints: also connect to one ready endpoint directly, bypassing the Service"`

	// Target is ENDPOINTS_SERVICE as Validate read it.
	Target types.NamespacedName `ignored:"true"`
}

// Validate implements KindOptions.
func (o *EndpointsOptions) Validate(*Options, Use) (err error) {
	o.Target, err = envvar.Service("ENDPOINTS_SERVICE", o.Service, "default", "default/kubernetes")
	return err
}

// Checks implements KindOptions.
func (o *EndpointsOptions) Checks(_ *Options, env Env) []Check {
	if env.Client == nil {
		return []Check{Skip(NameEndpoints, o.Target.String(), noKubeconfig)}
	}
	return []Check{NewEndpoints(env.Client, o.Target.Namespace, o.Target.Name, o.Connect, nil)}
}
