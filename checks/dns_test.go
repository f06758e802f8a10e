package checks_test

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/dns/dnsmessage"

	"github.com/nodeready/nodeready/checks"
)

// dnsServer answers A queries on loopback over UDP and TCP. Names are compared
// case-insensitively, as DNS does. A name in truncate gets a truncated UDP
// answer, so the resolver must retry over TCP. A silent server reads queries
// and never answers.
type dnsServer struct {
	records  map[string][4]byte // lower-case FQDN -> IPv4
	truncate map[string]bool
	silent   bool
}

// start serves until the test ends and returns "127.0.0.1:port".
func (s *dnsServer) start(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := pc.LocalAddr().String()
	// The same port over TCP; if something else holds it, TCP is not served
	// and only the truncation case would notice.
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err, "tcp on the UDP port")

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
			if resp := s.answer(buf[:n], true); resp != nil {
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
			wg.Go(func() {
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
					resp := s.answer(msg, false)
					if resp == nil {
						continue
					}
					_ = binary.Write(conn, binary.BigEndian, uint16(len(resp)))
					if _, err := conn.Write(resp); err != nil {
						return
					}
				}
			})
		}
	})
	return addr
}

// answer builds the response to one query, or nil for none.
func (s *dnsServer) answer(query []byte, udp bool) []byte {
	if s.silent {
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
	name := strings.ToLower(q.Name.String())
	ip, known := s.records[name]

	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	switch {
	case !known:
		rh.RCode = dnsmessage.RCodeNameError
	case udp && s.truncate[name]:
		rh.Truncated = true
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil
	}
	if err := b.Question(q); err != nil {
		return nil
	}
	if known && !rh.Truncated && q.Type == dnsmessage.TypeA {
		if err := b.StartAnswers(); err != nil {
			return nil
		}
		rr := dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 30}
		if err := b.AResource(rr, dnsmessage.AResource{A: ip}); err != nil {
			return nil
		}
	}
	resp, err := b.Finish()
	if err != nil {
		return nil
	}
	return resp
}

func TestDNS(t *testing.T) {
	srv := &dnsServer{
		records: map[string][4]byte{
			"svc.nodeready.test.": {10, 96, 0, 1},
			"big.nodeready.test.": {10, 96, 0, 2},
		},
		truncate: map[string]bool{"big.nodeready.test.": true},
	}
	resolver := checks.NewResolver(srv.start(t))

	tests := []struct {
		name    string
		host    string
		wantErr []string
	}{
		{name: "A record", host: "svc.nodeready.test"},
		{name: "trailing dot is fully qualified", host: "svc.nodeready.test."},
		{name: "upper case matches", host: "SVC.NodeReady.TEST"},
		{name: "truncated UDP answer retried over TCP", host: "big.nodeready.test."},
		{name: "NXDOMAIN", host: "missing.nodeready.test", wantErr: []string{`resolve "missing.nodeready.test": lookup missing.nodeready.test`, "no such host"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := checks.NewDNS(tt.host, resolver)
			require.Equal(t, "dns", c.Name())
			require.Equal(t, tt.host, c.Target())

			res := checks.Execute(t.Context(), c, 5*time.Second)

			if tt.wantErr == nil {
				assert.NoError(t, res.Err)
				return
			}
			require.Error(t, res.Err)
			for _, s := range tt.wantErr {
				assert.Contains(t, res.Err.Error(), s)
			}
			var dnsErr *net.DNSError
			require.True(t, errors.As(res.Err, &dnsErr))
			assert.True(t, dnsErr.IsNotFound)
		})
	}
}

func TestDNSServerNeverAnswers(t *testing.T) {
	srv := &dnsServer{silent: true}
	c := checks.NewDNS("svc.nodeready.test.", checks.NewResolver(srv.start(t)))
	const timeout = 300 * time.Millisecond

	res := checks.Execute(t.Context(), c, timeout)

	require.Error(t, res.Err)
	assert.Contains(t, res.Err.Error(), `resolve "svc.nodeready.test."`)
	assert.Contains(t, res.Err.Error(), "timed out after 300ms")
	// A bound on correctness (the check ends with its context), not a speed goal.
	assert.Less(t, res.Duration, timeout+time.Second)
}

func TestNewResolverDefault(t *testing.T) {
	assert.Same(t, net.DefaultResolver, checks.NewResolver(""))
}
