package scenarios

import (
	"encoding/binary"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/dns/dnsmessage"
)

// dnsServer is one node's node-local DNS cache: it answers A queries for a single name on
// loopback, over UDP and TCP. Broken, it answers NXDOMAIN for everything, as a cache whose
// upstream lost the cluster zone would.
type dnsServer struct {
	name   string // lower-case FQDN
	ip     [4]byte
	broken atomic.Bool
	addr   string
}

// startDNS serves name until the test ends.
func startDNS(t *testing.T, name string, ip [4]byte) *dnsServer {
	t.Helper()
	s := &dnsServer{name: strings.ToLower(strings.TrimSuffix(name, ".")) + ".", ip: ip}
	pc, ln := listenUDPAndTCP(t)
	s.addr = pc.LocalAddr().String()

	var wg sync.WaitGroup
	t.Cleanup(func() {
		pc.Close()
		ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if resp := s.answer(buf[:n]); resp != nil {
				_, _ = pc.WriteTo(resp, from)
			}
		}
	})
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { s.serveTCP(conn) })
		}
	})
	return s
}

// listenUDPAndTCP listens on one loopback port over UDP and over TCP, which the resolver
// uses after a truncated answer. The TCP port can be taken by another socket already (the
// kernel hands out the same ephemeral range for both), so it tries a few ports.
func listenUDPAndTCP(t *testing.T) (net.PacketConn, net.Listener) {
	t.Helper()
	var lastErr error
	for range 20 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		require.NoError(t, err)
		ln, err := net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			return pc, ln
		}
		pc.Close()
		lastErr = err
	}
	require.NoError(t, lastErr, "no loopback port free over both UDP and TCP")
	return nil, nil
}

func (s *dnsServer) serveTCP(conn net.Conn) {
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	for {
		var size uint16
		if err := binary.Read(conn, binary.BigEndian, &size); err != nil {
			return
		}
		msg := make([]byte, size)
		if _, err := io.ReadFull(conn, msg); err != nil {
			return
		}
		resp := s.answer(msg)
		if resp == nil {
			return
		}
		_ = binary.Write(conn, binary.BigEndian, uint16(len(resp)))
		if _, err := conn.Write(resp); err != nil {
			return
		}
	}
}

// answer builds the response to one query, or nil for a query it cannot parse.
func (s *dnsServer) answer(query []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	known := !s.broken.Load() && strings.ToLower(q.Name.String()) == s.name

	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	if !known {
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
	// AAAA of a known name: no error, no answer.
	if known && q.Type == dnsmessage.TypeA {
		if err := b.StartAnswers(); err != nil {
			return nil
		}
		rr := dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 5}
		if err := b.AResource(rr, dnsmessage.AResource{A: s.ip}); err != nil {
			return nil
		}
	}
	resp, err := b.Finish()
	if err != nil {
		return nil
	}
	return resp
}
