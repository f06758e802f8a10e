package datapath

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	"golang.org/x/sys/unix"
)

// dialFromNetns opens a connection from a socket made in the network namespace of pid: the
// goroutine's thread enters that namespace, dials, and goes back to its own before it is
// unlocked; the socket stays in the namespace it was made in. Should the way back fail, the
// thread stays locked and ends with the goroutine (the daemons do not die with it:
// process.Start forks them on a thread of their own).
func dialFromNetns(pid int, network, addr string, timeout time.Duration) (net.Conn, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer own.Close()
		target, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("setns: %w", err)}
			return
		}
		conn, err := net.DialTimeout(network, addr, timeout)
		if unix.Setns(int(own.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		ch <- result{conn, err}
	}()
	r := <-ch
	return r.conn, r.err
}

// queryFromNetns asks the DNS server at addr (TCP) for name's A records from the network
// namespace of pid.
func queryFromNetns(pid int, addr, name string) ([]string, error) {
	return paddedQueryFromNetns(pid, addr, name, 0)
}

// paddedQueryFromNetns is queryFromNetns with a query of pad bytes more (an EDNS0 padding
// option): what a transfer larger than one packet sends.
func paddedQueryFromNetns(pid int, addr, name string, pad int) ([]string, error) {
	conn, err := dialFromNetns(pid, "tcp", addr, 3*time.Second)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
	m := dnsmessage.Message{
		Header:    dnsmessage.Header{ID: 7, RecursionDesired: true},
		Questions: []dnsmessage.Question{{Name: dnsmessage.MustNewName(name), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}},
	}
	if pad > 0 {
		var opt dnsmessage.ResourceHeader
		if err := opt.SetEDNS0(1232, dnsmessage.RCodeSuccess, false); err != nil {
			return nil, err
		}
		m.Additionals = []dnsmessage.Resource{{Header: opt, Body: &dnsmessage.OPTResource{
			Options: []dnsmessage.Option{{Code: 12, Data: make([]byte, pad)}}, // RFC 7830 padding
		}}}
	}
	q, err := m.Pack()
	if err != nil {
		return nil, err
	}
	if _, err := conn.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(q))), q...)); err != nil {
		return nil, err
	}
	var size [2]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return nil, err
	}
	buf := make([]byte, binary.BigEndian.Uint16(size[:]))
	if _, err := io.ReadFull(conn, buf); err != nil {
		return nil, err
	}
	var answer dnsmessage.Message
	if err := answer.Unpack(buf); err != nil {
		return nil, err
	}
	var out []string
	for _, a := range answer.Answers {
		if rr, ok := a.Body.(*dnsmessage.AResource); ok {
			out = append(out, netip.AddrFrom4(rr.A).String())
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no A record in the answer: %+v", answer.Header)
	}
	return out, nil
}

// getFromNetns sends an HTTP GET of url from the network namespace of pid and returns the body.
func getFromNetns(ctx context.Context, pid int, host, path string) (string, error) {
	conn, err := dialFromNetns(pid, "tcp", host, 3*time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+path, nil)
	if err != nil {
		return "", err
	}
	req.Close = true
	if err := req.Write(conn); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// linkMTU reads the MTU of the interface eth0 in the network namespace of pid: a pod's, as its
// CNI set it.
func linkMTU(pid int) (int, error) {
	out, err := exec.Command("nsenter", "--net=/proc/"+strconv.Itoa(pid)+"/ns/net", "--", "ip", "-o", "link", "show", "eth0").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("ip link show eth0: %w: %s", err, out)
	}
	m := regexp.MustCompile(`\bmtu (\d+)\b`).FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("no mtu in %q", out)
	}
	return strconv.Atoi(string(m[1]))
}
