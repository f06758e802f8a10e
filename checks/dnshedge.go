package checks

import (
	"context"
	"net"
	"os"
	"sync"
	"time"
)

// hedgeAfter is how long a DNS query over UDP waits for an answer before it is sent again:
// a working cluster DNS answers in milliseconds. Each later resend waits twice as long as
// the one before (resendAfter), so a nameserver that is only slow, every new node of a burst
// asking it at once, gets a few copies of a query, not one every half second.
const hedgeAfter = 500 * time.Millisecond

// resendAfter is how long to wait for an answer before the resend numbered n (from 0):
// hedgeAfter, doubled at each resend up to 16 times it.
func resendAfter(n int) time.Duration { return hedgeAfter << min(n, 4) }

// hedgedDialer dials the nameserver for the Go resolver. Over UDP, a query that gets no
// answer within after is sent again from a new socket, and again after twice as long each
// time, and the first answer from any of them is taken. The cluster DNS is a Service: kube-proxy sends each new
// socket's queries to one of its backends at random, and one of them may never answer (a
// CoreDNS pod on a node whose pod network broke stays Ready: the kubelet probes it from its
// own node). With the search list a lookup asks several questions one after another, each of
// which would wait out the resolver's whole timeout on that backend; hedged, it costs a
// lookup half a second, not its verification. A node that reaches no backend still fails.
type hedgedDialer struct {
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// DialContext is the resolver's Dial.
func (h hedgedDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := h.dial(ctx, network, addr)
	if err != nil || (network != "udp" && network != "udp4" && network != "udp6") {
		return conn, err
	}
	c := &hedgedConn{Conn: conn, ctx: context.WithoutCancel(ctx), network: network, addr: addr, dial: h.dial,
		answers: make(chan []byte, 16), closed: make(chan struct{})}
	c.read(conn)
	return c, nil
}

// hedgedConn is a UDP "connection" that is one or more sockets to the same address.
type hedgedConn struct {
	net.Conn // the first socket: addresses, and the deadline the resolver sets
	ctx      context.Context
	network  string
	addr     string
	dial     func(ctx context.Context, network, addr string) (net.Conn, error)
	answers  chan []byte
	closed   chan struct{}

	mu       sync.Mutex
	query    []byte
	extra    []net.Conn // the sockets of the resends
	deadline time.Time
	done     bool
}

// read copies every datagram of conn to the answers until conn is closed.
func (c *hedgedConn) read(conn net.Conn) {
	go func() {
		for {
			buf := make([]byte, 65535)
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			select {
			case c.answers <- buf[:n]:
			case <-c.closed:
				return
			}
		}
	}()
}

// Write sends the query on the first socket, and keeps it to send again.
func (c *hedgedConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	c.query = append([]byte(nil), b...)
	c.mu.Unlock()
	return c.Conn.Write(b)
}

// Read returns the next datagram from any socket; while none comes, it sends the query again
// from a new socket, each time after resendAfter, until the deadline.
func (c *hedgedConn) Read(b []byte) (int, error) {
	c.mu.Lock()
	deadline, resends := c.deadline, len(c.extra)
	c.mu.Unlock()
	var expired <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		expired = t.C
	}
	hedge := time.NewTimer(resendAfter(resends))
	defer hedge.Stop()
	for {
		select {
		case a := <-c.answers:
			return copy(b, a), nil
		case <-expired:
			return 0, os.ErrDeadlineExceeded
		case <-c.closed:
			return 0, net.ErrClosed
		case <-hedge.C:
			c.again()
			resends++
			hedge.Reset(resendAfter(resends))
		}
	}
}

// again sends the query from a new socket. A socket that cannot be opened is no answer.
func (c *hedgedConn) again() {
	c.mu.Lock()
	query := c.query
	c.mu.Unlock()
	if query == nil {
		return
	}
	conn, err := c.dial(c.ctx, c.network, c.addr)
	if err != nil {
		return
	}
	c.mu.Lock()
	if c.done {
		c.mu.Unlock()
		conn.Close()
		return
	}
	c.extra = append(c.extra, conn)
	c.mu.Unlock()
	c.read(conn)
	_, _ = conn.Write(query)
}

// SetDeadline and SetReadDeadline bound Read; the sockets themselves wait until closed.
func (c *hedgedConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return c.Conn.SetWriteDeadline(t)
}

func (c *hedgedConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return nil
}

// Close closes every socket.
func (c *hedgedConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return nil
	}
	c.done = true
	close(c.closed)
	for _, conn := range c.extra {
		conn.Close()
	}
	return c.Conn.Close()
}

// ReadFrom and WriteTo make it a net.PacketConn, which is how the Go resolver tells a
// datagram exchange from a stream's.
func (c *hedgedConn) ReadFrom(b []byte) (int, net.Addr, error) {
	n, err := c.Read(b)
	return n, c.RemoteAddr(), err
}

func (c *hedgedConn) WriteTo(b []byte, _ net.Addr) (int, error) { return c.Write(b) }

var _ net.PacketConn = (*hedgedConn)(nil)
