package checks

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	corev1 "k8s.io/api/core/v1"
)

// reach probes one pod: the round trip that proves this node's pod network reaches it.
func (c *PodNetwork) reach(ctx context.Context, t podTarget) error {
	addr := net.JoinHostPort(t.addr, strconv.Itoa(int(t.port)))
	switch {
	case c.probe.DNSName != "":
		return c.query(ctx, addr, t.protocol)
	case c.probe.HTTPPath != "":
		client := &http.Client{
			Transport: &http.Transport{DialContext: c.probe.Dialer.DialContext, DisableKeepAlives: true},
			// Any status is an answer; a redirect is one too, never a second request to wherever
			// it points.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+c.probe.HTTPPath, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		return resp.Body.Close()
	default:
		conn, err := dialTCP(ctx, c.probe.Dialer, addr)
		if err != nil {
			return err
		}
		return conn.Close()
	}
}

// query asks the pod at addr one DNS question, over UDP or TCP as its port is, and passes
// on any answer to it: NXDOMAIN, SERVFAIL or REFUSED prove the path as well as an address
// does. It is sent as is, to the pod alone: no hosts file, search list or other server of
// the agent's resolv.conf takes part.
func (c *PodNetwork) query(ctx context.Context, addr string, protocol corev1.Protocol) error {
	network := "udp"
	if protocol == corev1.ProtocolTCP {
		network = "tcp"
	}
	name, err := dnsmessage.NewName(c.probe.DNSName)
	if err != nil {
		return fmt.Errorf("query %s: %w", c.probe.DNSName, err)
	}
	id := uint16(rand.Uint32())
	msg := dnsmessage.Message{
		Header:    dnsmessage.Header{ID: id, RecursionDesired: true},
		Questions: []dnsmessage.Question{{Name: name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}},
	}
	query, err := msg.Pack()
	if err != nil {
		return fmt.Errorf("query %s: %w", c.probe.DNSName, err)
	}
	conn, err := c.probe.Dialer.DialContext(ctx, network, addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if network == "tcp" { // a TCP message is prefixed with its length
		query = append(binary.BigEndian.AppendUint16(nil, uint16(len(query))), query...)
	}
	buf := make([]byte, 65535)
	for sent, resends := false, 0; ; {
		if !sent {
			if _, err := conn.Write(query); err != nil {
				return fmt.Errorf("query %s over %s at %s: %w", c.probe.DNSName, network, addr, err)
			}
			if network == "udp" { // a datagram may be lost: sent again after resendAfter, as the dns check does
				_ = conn.SetReadDeadline(earliest(deadline, time.Now().Add(resendAfter(resends))))
				resends++
			}
			sent = true
		}
		n, err := readAnswer(conn, network, buf)
		if network == "udp" && ctx.Err() == nil && errors.Is(err, os.ErrDeadlineExceeded) && (deadline.IsZero() || time.Now().Before(deadline)) {
			sent = false
			continue
		}
		if err != nil {
			return fmt.Errorf("query %s over %s at %s: %w", c.probe.DNSName, network, addr, err)
		}
		var h dnsmessage.Parser
		hdr, err := h.Start(buf[:n])
		if err == nil && hdr.ID == id && hdr.Response {
			return nil // an answer, whatever its code
		}
		// Not the answer to this query (a stray datagram): wait for the next.
	}
}

// readAnswer reads one DNS message: a datagram, or over TCP one length-prefixed message.
func readAnswer(conn net.Conn, network string, buf []byte) (int, error) {
	if network == "udp" {
		return conn.Read(buf)
	}
	if _, err := io.ReadFull(conn, buf[:2]); err != nil {
		return 0, err
	}
	n := int(binary.BigEndian.Uint16(buf[:2]))
	if _, err := io.ReadFull(conn, buf[:n]); err != nil {
		return 0, err
	}
	return n, nil
}

// errNoSegment: the probe sends nothing a full segment could be part of (a TCP connection
// alone), or the pod has no TCP port.
var errNoSegment = errors.New("no TCP exchange to send a full segment in")

// errNoConnection: the TCP connection to send a full segment in did not open.
var errNoConnection = errors.New("no TCP connection")

// segment sends the pod, over TCP, a message one byte longer than the largest segment this
// pod sends it (TCP_MAXSEG: the route's MTU less the headers, or less when the pod announced
// less), and waits for the answer: a DNS query padded with EDNS0 padding (RFC 7830), or an
// HTTP GET with a padding header. The pod answers only a whole message, so an answer proves
// that a full-size segment crossed from this pod to it. It needs no capability; the way back
// stays unproven (the answer is small). It returns the size proven, in bytes of the IP packet.
func (c *PodNetwork) segment(ctx context.Context, t podTarget) (int, error) {
	if t.segmentPort == 0 {
		return 0, errNoSegment
	}
	addr := net.JoinHostPort(t.addr, strconv.Itoa(int(t.segmentPort)))
	// The pod has just answered: an open port accepts at once, and a connection that does
	// not open within straggle (a SYN dropped by a policy) would only hold the round up.
	dialCtx, cancel := context.WithTimeout(ctx, straggle)
	conn, err := dialTCP(dialCtx, c.probe.Dialer, addr)
	cancel()
	if err != nil {
		return 0, fmt.Errorf("%w: %w", errNoConnection, err)
	}
	defer conn.Close()
	mss, err := tcpMSS(conn)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", errNoSegment, err)
	}
	if d, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	header := 20 + 20 // IPv4 and TCP, without options
	if familyOf(t.addr) == "IPv6" {
		header = 40 + 20
	}
	if c.probe.DNSName != "" {
		err = c.paddedQuery(conn, mss+1)
	} else {
		err = c.paddedGet(ctx, conn, addr, mss+1)
	}
	if err != nil {
		return 0, fmt.Errorf("no answer to a %d-byte TCP segment to %s: %w", mss+header, addr, err)
	}
	return mss + header, nil
}

// paddedQuery asks the DNS question in a message of size bytes on the stream (its length
// prefix included), padded with an EDNS0 padding option, and waits for any answer.
func (c *PodNetwork) paddedQuery(conn net.Conn, size int) error {
	build := func(pad int) ([]byte, error) {
		name, err := dnsmessage.NewName(c.probe.DNSName)
		if err != nil {
			return nil, err
		}
		var opt dnsmessage.ResourceHeader
		if err := opt.SetEDNS0(1232, dnsmessage.RCodeSuccess, false); err != nil {
			return nil, err
		}
		return (&dnsmessage.Message{
			Header:    dnsmessage.Header{ID: 1, RecursionDesired: true},
			Questions: []dnsmessage.Question{{Name: name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}},
			Additionals: []dnsmessage.Resource{{Header: opt, Body: &dnsmessage.OPTResource{
				Options: []dnsmessage.Option{{Code: ednsPadding, Data: make([]byte, pad)}},
			}}},
		}).Pack()
	}
	bare, err := build(0)
	if err != nil {
		return err
	}
	msg, err := build(min(max(size-2-len(bare), 0), 65535-2-len(bare)))
	if err != nil {
		return err
	}
	if _, err := conn.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(msg))), msg...)); err != nil {
		return err
	}
	_, err = readAnswer(conn, "tcp", make([]byte, 65535))
	return err
}

// ednsPadding is the EDNS0 padding option's code (RFC 7830).
const ednsPadding = 12

// paddedGet sends an HTTP GET of the path, of size bytes with a padding header, and waits
// for the status line of any answer.
func (c *PodNetwork) paddedGet(ctx context.Context, conn net.Conn, addr string, size int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+c.probe.HTTPPath, nil)
	if err != nil {
		return err
	}
	req.Close = true
	var head bytes.Buffer
	if err := req.Write(&head); err != nil {
		return err
	}
	if pad := size - head.Len() - len("X-Padding: \r\n"); pad > 0 {
		req.Header.Set("X-Padding", strings.Repeat("x", pad))
	}
	if err := req.Write(conn); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// earliest is the earlier of two times, a zero one being no time at all.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}
