// Package dnstest provides a DNS server on loopback for tests, the demo and benchmarks, as
// net/http/httptest does for HTTP: a real server that the Go resolver reaches over UDP and
// TCP, with switches for the failures a DNS check must tell apart.
//
// Point a resolver at it with checks.NewResolver(srv.Addr()), or give Addr to an agent as
// DNS_NAMESERVER.
package dnstest

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// TTL is the time to live of every answer, in seconds: short, as a node-local cache's
// answers for cluster names are, so that a resolver that caches sees a change soon.
const TTL = 5

// tcpIdleTimeout closes a TCP connection on which no complete query arrives in time.
const tcpIdleTimeout = 5 * time.Second

// Server answers queries for a fixed set of names on a loopback port, over UDP and TCP. An
// A query for a name it knows gets the name's IPv4 addresses, an AAAA query its IPv6
// addresses, any other query for it an empty NOERROR answer; every other name gets
// NXDOMAIN. Names compare case-insensitively, as in DNS.
//
// The switches change every later answer; they are safe to flip while queries run. Delay,
// Hold and Queries make a slow nameserver whose timing a test controls, so it can act while
// a check waits for an answer.
type Server struct {
	records map[string][]netip.Addr // lower-case FQDN -> addresses
	addr    string

	broken      atomic.Bool
	silent      atomic.Bool
	truncateUDP atomic.Bool
	delay       atomic.Int64 // nanoseconds before each answer

	pc   net.PacketConn
	ln   net.Listener
	wg   sync.WaitGroup
	done chan struct{} // closed by Close

	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	closed  bool
	gate    chan struct{}     // closed while answers may go (see Hold)
	count   int64             // queries received
	seen    map[queryKey]bool // every query received
	queried chan struct{}     // closed and replaced at every query
}

// NewServer starts a server that answers for the names in records, which it copies. A
// name may be given with or without its trailing dot. Close stops it.
func NewServer(records map[string][]netip.Addr) (*Server, error) {
	s := &Server{records: make(map[string][]netip.Addr, len(records)), conns: map[net.Conn]struct{}{},
		done: make(chan struct{}), gate: make(chan struct{}), queried: make(chan struct{}), seen: map[queryKey]bool{}}
	close(s.gate)
	for name, addrs := range records {
		for _, a := range addrs {
			if !a.IsValid() {
				return nil, fmt.Errorf("dnstest: invalid address for %s", name)
			}
		}
		fqdn := canonical(name)
		s.records[fqdn] = append(s.records[fqdn], addrs...)
	}
	pc, ln, err := listenUDPAndTCP()
	if err != nil {
		return nil, err
	}
	s.pc, s.ln, s.addr = pc, ln, pc.LocalAddr().String()
	s.wg.Go(s.serveUDP)
	s.wg.Go(s.serveTCP)
	return s, nil
}

// Addr returns the "127.0.0.1:port" the server listens on, over both UDP and TCP.
func (s *Server) Addr() string { return s.addr }

// SetBroken makes the server answer NXDOMAIN for every name while broken is true, as a
// cache whose upstream lost the zone would.
func (s *Server) SetBroken(broken bool) { s.broken.Store(broken) }

// SetSilent makes the server read queries and never answer while silent is true, as a
// nameserver behind a dropping firewall: a lookup ends only when its context does.
func (s *Server) SetSilent(silent bool) { s.silent.Store(silent) }

// SetTruncateUDP makes every UDP answer truncated and empty while truncate is true, as for
// an answer too large for a datagram, so a resolver must ask again over TCP.
func (s *Server) SetTruncateUDP(truncate bool) { s.truncateUDP.Store(truncate) }

// SetDelay makes every later answer wait d after its query, as a slow or distant nameserver.
func (s *Server) SetDelay(d time.Duration) { s.delay.Store(int64(d)) }

// Hold keeps every answer, also those of queries already waiting, until Open.
func (s *Server) Hold() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.gate:
		s.gate = make(chan struct{})
	default:
	}
}

// Open lets the held answers go, each once its delay has passed.
func (s *Server) Open() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.gate:
	default:
		close(s.gate)
	}
}

// Queries returns how many queries the server has received, and a channel closed at the next.
// A query sent again unchanged (same transport, same ID, same question: the resend of a client
// that waited for an answer) is one query, so a count tells the lookups a client made however
// often it resent them.
func (s *Server) Queries() (int64, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count, s.queried
}

// queryKey is a query as the server received it: its transport and its bytes.
type queryKey struct {
	udp bool
	msg string
}

func (s *Server) received(msg []byte, udp bool) {
	key := queryKey{udp: udp, msg: string(msg)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen[key] {
		return
	}
	s.seen[key] = true
	s.count++
	close(s.queried)
	s.queried = make(chan struct{})
}

// wait waits until answers may go (not held) and the delay has passed; false when the
// server closes first. A Hold during the delay holds this answer too.
func (s *Server) wait() bool {
	for {
		s.mu.Lock()
		gate := s.gate
		s.mu.Unlock()
		select {
		case <-s.done:
			return false
		case <-gate:
		}
		if d := time.Duration(s.delay.Load()); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-s.done:
				t.Stop()
				return false
			case <-t.C:
			}
		}
		s.mu.Lock()
		stillOpen := gate == s.gate
		s.mu.Unlock()
		if stillOpen {
			return true
		}
	}
}

// Close stops the server, closes open TCP connections, drops the answers still waiting and
// waits for its goroutines. It is idempotent.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.done)
	s.pc.Close()
	s.ln.Close()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// listenUDPAndTCP listens on one loopback port over UDP and over TCP. The kernel hands out
// UDP and TCP ports from the same ephemeral range independently, so the TCP port can be
// taken already; it tries a few ports.
func listenUDPAndTCP() (net.PacketConn, net.Listener, error) {
	var lastErr error
	for range 20 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, fmt.Errorf("dnstest: listen udp: %w", err)
		}
		ln, err := net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			return pc, ln, nil
		}
		pc.Close()
		lastErr = err
	}
	return nil, nil, fmt.Errorf("dnstest: no loopback port free over both UDP and TCP: %w", lastErr)
}

// serveUDP answers each datagram on its own goroutine, so a delayed or held answer does not
// hold up the others.
func (s *Server) serveUDP() {
	for {
		buf := make([]byte, 1500)
		n, from, err := s.pc.ReadFrom(buf)
		if err != nil {
			return
		}
		s.received(buf[:n], true)
		s.wg.Go(func() {
			if resp := s.answer(buf[:n], true); resp != nil && s.wait() {
				_, _ = s.pc.WriteTo(resp, from)
			}
		})
	}
}

func (s *Server) serveTCP() {
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			conn.Close()
			return
		}
		s.conns[conn] = struct{}{}
		s.mu.Unlock()
		s.wg.Go(func() {
			defer func() {
				s.mu.Lock()
				delete(s.conns, conn)
				s.mu.Unlock()
				conn.Close()
			}()
			s.serveConn(conn)
		})
	}
}

// serveConn answers the length-prefixed queries of one TCP connection until the client
// closes it or stays idle for too long.
func (s *Server) serveConn(conn net.Conn) {
	for {
		_ = conn.SetDeadline(time.Now().Add(tcpIdleTimeout))
		var size uint16
		if err := binary.Read(conn, binary.BigEndian, &size); err != nil {
			return
		}
		msg := make([]byte, size)
		if _, err := io.ReadFull(conn, msg); err != nil {
			return
		}
		s.received(msg, false)
		resp := s.answer(msg, false)
		if resp == nil {
			continue
		}
		if !s.wait() {
			return
		}
		_ = conn.SetDeadline(time.Now().Add(tcpIdleTimeout))
		_ = binary.Write(conn, binary.BigEndian, uint16(len(resp)))
		if _, err := conn.Write(resp); err != nil {
			return
		}
	}
}

// answer builds the response to one query, or nil for none: silent, or a query it cannot
// parse.
func (s *Server) answer(query []byte, udp bool) []byte {
	if s.silent.Load() {
		return nil
	}
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	addrs, known := s.records[strings.ToLower(q.Name.String())]
	known = known && !s.broken.Load()

	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	switch {
	case udp && s.truncateUDP.Load():
		rh.Truncated = true
	case !known:
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil
	}
	if err := b.Question(q); err != nil {
		return nil
	}
	if known && !rh.Truncated {
		if err := b.StartAnswers(); err != nil {
			return nil
		}
		rr := dnsmessage.ResourceHeader{Name: q.Name, Type: q.Type, Class: dnsmessage.ClassINET, TTL: TTL}
		for _, a := range addrs {
			switch {
			case q.Type == dnsmessage.TypeA && a.Is4():
				err = b.AResource(rr, dnsmessage.AResource{A: a.As4()})
			case q.Type == dnsmessage.TypeAAAA && a.Is6():
				err = b.AAAAResource(rr, dnsmessage.AAAAResource{AAAA: a.As16()})
			}
			if err != nil {
				return nil
			}
		}
	}
	resp, err := b.Finish()
	if err != nil {
		return nil
	}
	return resp
}

// canonical returns name as a lower-case FQDN, the form the server compares queries in.
func canonical(name string) string {
	return strings.ToLower(strings.TrimSuffix(name, ".")) + "."
}
