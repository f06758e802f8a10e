package checks

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/nodeready/nodeready/internal/envvar"
)

var _ Check = (*TCP)(nil)

// TCP passes when a TCP connection to one address can be established. It
// closes the connection at once and sends nothing.
type TCP struct {
	addr   string
	dialer *net.Dialer
}

// NewTCP returns a check that connects to addr ("host:port") with d
// (a zero net.Dialer when nil).
func NewTCP(addr string, d *net.Dialer) *TCP {
	if d == nil {
		d = &net.Dialer{}
	}
	return &TCP{addr: addr, dialer: d}
}

// Name implements Check.
func (c *TCP) Name() string { return string(NameTCP) }

// Target implements Check.
func (c *TCP) Target() string { return c.addr }

// Run implements Check.
func (c *TCP) Run(ctx context.Context) error {
	conn, err := dialTCP(ctx, c.dialer, c.addr)
	if err != nil {
		return err
	}
	return conn.Close()
}

// dialTCP dials addr and returns an error that names the address once.
func dialTCP(ctx context.Context, d *net.Dialer, addr string) (net.Conn, error) {
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		// A *net.OpError with an address already reads
		// "dial tcp 10.0.0.1:443: connect: connection refused"; one without
		// (a failed name lookup) lacks the port, so add the address.
		var op *net.OpError
		if errors.As(err, &op) && op.Addr != nil {
			return nil, err
		}
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return conn, nil
}

// TCPOptions are the tcp check's variables. The kubelet sets KUBERNETES_SERVICE_HOST
// and KUBERNETES_SERVICE_PORT in every pod.
type TCPOptions struct {
	Targets     envvar.List `envconfig:"TCP_TARGETS" desc:"tcp: host:port list to connect to; empty for the API server's service address KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT"`
	ServiceHost string      `envconfig:"KUBERNETES_SERVICE_HOST" desc:"Set by the kubelet in every pod; the default tcp target"`
	ServicePort string      `envconfig:"KUBERNETES_SERVICE_PORT" default:"443" desc:"Set by the kubelet in every pod; the default tcp target's port"`

	// Addresses are the addresses to connect to, as Validate read them:
	// TCP_TARGETS, or the API server's service address when it is empty; none
	// when neither is set.
	Addresses []string `ignored:"true"`
}

// Validate implements KindOptions. Without TCP_TARGETS the target is the API
// server's service address: its IP, so the tcp check does not depend on DNS.
func (o *TCPOptions) Validate(_ *Options, use Use) error {
	for _, t := range o.Targets {
		if err := envvar.HostPort("TCP_TARGETS", t); err != nil {
			return err
		}
	}
	if o.ServiceHost != "" {
		if err := envvar.HostPort("KUBERNETES_SERVICE_PORT", net.JoinHostPort(o.ServiceHost, o.ServicePort)); err != nil {
			return err
		}
	}
	o.Addresses = o.Targets
	if len(o.Targets) == 0 && o.ServiceHost != "" {
		o.Addresses = []string{net.JoinHostPort(o.ServiceHost, o.ServicePort)}
	}
	if use.Selected && len(o.Addresses) == 0 && !use.DryRun {
		return envvar.Required("TCP_TARGETS", "CHECKS has tcp and KUBERNETES_SERVICE_HOST is not set: a comma-separated list of host:port")
	}
	return nil
}

// Checks implements KindOptions: one check per target.
func (o *TCPOptions) Checks(_ *Options, _ Env) []Check {
	targets := o.Addresses
	if len(targets) == 0 {
		return []Check{Skip(NameTCP, "-", "no target: TCP_TARGETS is empty and KUBERNETES_SERVICE_HOST is not set")}
	}
	list := make([]Check, len(targets))
	for i, a := range targets {
		list[i] = NewTCP(a, nil)
	}
	return list
}
