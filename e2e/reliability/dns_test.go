package reliability

import (
	"encoding/binary"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/nodeready/nodeready/e2e/harness"
)

// slowDNS is a node-local DNS server whose answers take their time: each query of
// harness.DNSName is answered after a delay, and not before the server is open (see hold).
// It tells the test about every query, so a test can act while an agent's checks wait for
// it. Every other name gets NXDOMAIN. It serves UDP and TCP on one loopback port.
type slowDNS struct {
	addr  string
	pc    net.PacketConn
	ln    net.Listener
	delay atomic.Int64 // nanoseconds
	count atomic.Int64 // queries received

	mu      sync.Mutex
	gate    chan struct{} // closed while open
	queried chan struct{} // closed and replaced at every query
	done    chan struct{}
	wg      sync.WaitGroup
}

// dnsIP is what the server answers for harness.DNSName, as the fleets' servers do.
var dnsIP = [4]byte{10, 96, 0, 1}

// newSlowDNS starts an open server that answers after delay, until the test ends.
func newSlowDNS(t *testing.T, delay time.Duration) *slowDNS {
	t.Helper()
	s := &slowDNS{gate: make(chan struct{}), queried: make(chan struct{}), done: make(chan struct{})}
	close(s.gate)
	s.delay.Store(int64(delay))
	var err error
	for range 20 {
		if s.pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatalf("dns: %v", err)
		}
		if s.ln, err = net.Listen("tcp", s.pc.LocalAddr().String()); err == nil {
			break
		}
		s.pc.Close()
	}
	if err != nil {
		t.Fatalf("dns: no loopback port free over both UDP and TCP: %v", err)
	}
	s.addr = s.pc.LocalAddr().String()
	s.wg.Go(s.serveUDP)
	s.wg.Go(s.serveTCP)
	t.Cleanup(s.close)
	return s
}

func (s *slowDNS) close() {
	close(s.done)
	s.pc.Close()
	s.ln.Close()
	s.wg.Wait()
}

// setDelay sets the delay of every later answer.
func (s *slowDNS) setDelay(d time.Duration) { s.delay.Store(int64(d)) }

// hold keeps every answer, also of queries already waiting, until open.
func (s *slowDNS) hold() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.gate:
		s.gate = make(chan struct{})
	default:
	}
}

// open lets the held answers go, each after its delay.
func (s *slowDNS) open() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.gate:
	default:
		close(s.gate)
	}
}

// queries returns how many queries the server received, and a channel closed at the next.
func (s *slowDNS) queries() (int64, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count.Load(), s.queried
}

func (s *slowDNS) received() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count.Add(1)
	close(s.queried)
	s.queried = make(chan struct{})
}

// wait waits until the gate is open and the delay has passed; false when the server stops.
func (s *slowDNS) wait() bool {
	for {
		s.mu.Lock()
		gate := s.gate
		s.mu.Unlock()
		select {
		case <-s.done:
			return false
		case <-gate:
		}
		t := time.NewTimer(time.Duration(s.delay.Load()))
		select {
		case <-s.done:
			t.Stop()
			return false
		case <-t.C:
		}
		s.mu.Lock()
		stillOpen := gate == s.gate
		s.mu.Unlock()
		if stillOpen {
			return true
		}
	}
}

func (s *slowDNS) serveUDP() {
	for {
		buf := make([]byte, 1500)
		n, from, err := s.pc.ReadFrom(buf)
		if err != nil {
			return
		}
		s.received()
		s.wg.Go(func() {
			if resp := answer(buf[:n]); resp != nil && s.wait() {
				_, _ = s.pc.WriteTo(resp, from)
			}
		})
	}
}

func (s *slowDNS) serveTCP() {
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.wg.Go(func() {
			defer conn.Close()
			go func() {
				<-s.done
				conn.Close()
			}()
			for {
				var size uint16
				if err := binary.Read(conn, binary.BigEndian, &size); err != nil {
					return
				}
				msg := make([]byte, size)
				if _, err := io.ReadFull(conn, msg); err != nil {
					return
				}
				s.received()
				resp := answer(msg)
				if resp == nil || !s.wait() {
					return
				}
				_ = binary.Write(conn, binary.BigEndian, uint16(len(resp)))
				if _, err := conn.Write(resp); err != nil {
					return
				}
			}
		})
	}
}

// answer builds the response to one query: harness.DNSName's address for an A query, an
// empty answer for its other types, NXDOMAIN for other names; nil for a query it cannot
// parse. Names compare case-insensitively.
func answer(query []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	known := strings.EqualFold(strings.TrimSuffix(q.Name.String(), "."), harness.DNSName)
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	if !known {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	if b.StartQuestions() != nil || b.Question(q) != nil {
		return nil
	}
	if known && q.Type == dnsmessage.TypeA {
		if b.StartAnswers() != nil {
			return nil
		}
		rr := dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 5}
		if b.AResource(rr, dnsmessage.AResource{A: dnsIP}) != nil {
			return nil
		}
	}
	resp, err := b.Finish()
	if err != nil {
		return nil
	}
	return resp
}
