package checks

import (
	"context"
	"errors"
	"fmt"
	"net"
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
