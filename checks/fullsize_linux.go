package checks

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

// PingFullSize proves that packets of the largest size this pod's route to ip allows cross
// to ip and back unfragmented: an ICMP echo with don't-fragment set, sized to the MTU the
// kernel gives a socket connected to ip (the route's own MTU, else its interface's), whose
// reply is as large, as cilium-cli's pod-to-pod-no-frag test does. A small echo goes beside
// it, which tells a path that drops large packets (ErrFullSizeLost) from one that answers no
// echo at all (ErrFullSizeNotChecked). It uses an unprivileged ping socket, which a pod may
// open when its net.ipv4.ping_group_range holds its group (containerd 2 opens it to every
// group: enable_unprivileged_icmp). It returns the size proven, in bytes of the IP packet.
//
// A router on the way that cannot forward the echo says so with an ICMP "fragmentation
// needed" (IPv6 "packet too big"): the kernel keeps the path's MTU for the address, which a
// socket connected anew reads as its route's MTU, and a connected IPv4 ping socket also
// fails its next read or send with EMSGSIZE. That is path-MTU discovery working, not a
// blackhole: the echo is sent again at the path's MTU, up to pathSteps times (one for each
// smaller link on the way), and a size proven there returns with ErrPathSmaller. Only a size
// lost while the kernel learns nothing smaller is ErrFullSizeLost.
func PingFullSize(ctx context.Context, ip netip.Addr) (int, error) {
	route, tried := 0, 0 // the route's MTU at first, and the size tried last
	var failed error     // why the size tried last proved nothing
	for range pathSteps + 1 {
		size, big, small, err := pingOnce(ctx, ip, tried)
		switch {
		case errors.Is(err, errNothingSmaller):
			return 0, failed
		case errors.Is(err, unix.EMSGSIZE):
			// An ICMP error for the large echo, or a route that shrank under us: once more,
			// at the MTU the kernel gives a new socket.
			failed = err
		case err != nil:
			return 0, err
		case big && route > size:
			return size, fmt.Errorf("%w: this pod's route sends %d-byte packets, the path to %s carries %d "+
				"(an ICMP error said so: path-MTU discovery works)", ErrPathSmaller, route, ip, size)
		case big:
			return size, nil
		case small:
			failed = fmt.Errorf("%w: no answer to %d-byte pings with don't-fragment set, while %d-byte ones are answered",
				ErrFullSizeLost, size, smallPing+headerOf(ip))
		default:
			return 0, fmt.Errorf("%w: no answer to pings of any size (%d or %d bytes): ICMP is filtered on the way",
				ErrFullSizeNotChecked, size, smallPing+headerOf(ip))
		}
		route, tried = cmp.Or(route, size), size
	}
	return 0, failed
}

// pathSteps is how many times PingFullSize tries a smaller size the kernel learned: one for
// each link of a smaller MTU on the way.
const pathSteps = 3

// errNothingSmaller: the route's MTU is not below the size tried last.
var errNothingSmaller = errors.New("no smaller path MTU learned")

// pingOnce sends, from a ping socket of its own, an echo of the route's MTU and a small one,
// and reports the size and which were answered. After a size that proved nothing (tried is
// not 0) it sends only when the route's MTU is now smaller (else errNothingSmaller): a new
// socket, because a connected one keeps the route it was connected with.
func pingOnce(ctx context.Context, ip netip.Addr, tried int) (size int, big, small bool, err error) {
	p, err := newPinger(ip)
	if err != nil {
		return 0, false, false, err
	}
	defer p.conn.Close()
	if size, err = p.routeMTU(); err != nil {
		return 0, false, false, err
	}
	if tried != 0 && size >= tried {
		return size, false, false, errNothingSmaller
	}
	big, small, err = p.exchange(ctx, size-p.header, smallPing)
	return size, big, small, err
}

// headerOf is the IP and ICMP headers of an echo to ip.
func headerOf(ip netip.Addr) int {
	if ip.Unmap().Is6() {
		return 40 + 8
	}
	return 20 + 8
}

// smallPing is the payload of the echo that tells a path that drops large packets: ping(8)'s.
const smallPing = 56

// pingTries and pingWait pace the echoes: a lost packet is not a lost path.
const (
	pingTries = 3
	pingWait  = 500 * time.Millisecond
)

// pinger is a ping socket connected to one address.
type pinger struct {
	conn    net.Conn
	raw     syscall.RawConn
	v6      bool
	header  int // the IP and ICMP headers: what the echo's payload leaves of the packet
	request icmp.Type
	proto   int // the ICMP protocol number, to parse replies
}

func newPinger(ip netip.Addr) (*pinger, error) {
	ip = ip.Unmap()
	p := &pinger{header: 20 + 8, request: ipv4.ICMPTypeEcho, proto: 1}
	family, proto, level, opt, probe := unix.AF_INET, unix.IPPROTO_ICMP, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_PROBE
	var sa unix.Sockaddr
	if ip.Is6() {
		p.v6, p.header, p.request, p.proto = true, 40+8, ipv6.ICMPTypeEchoRequest, 58
		family, proto, level, opt, probe = unix.AF_INET6, unix.IPPROTO_ICMPV6, unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_PROBE
		sa = &unix.SockaddrInet6{Addr: ip.As16()}
	} else {
		sa = &unix.SockaddrInet4{Addr: ip.As4()}
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, proto)
	if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EPROTONOSUPPORT) {
		return nil, fmt.Errorf("%w: this pod may not open a ping socket (its net.ipv4.ping_group_range leaves out its group)", ErrFullSizeNotChecked)
	}
	if err != nil {
		return nil, fmt.Errorf("ping socket: %w", err)
	}
	// Don't fragment, here or on the way, and send at the route's MTU whatever this host
	// learned of the path: a packet too large for a link is lost, never cut in two.
	if err = unix.SetsockoptInt(fd, level, opt, probe); err == nil {
		err = unix.Connect(fd, sa)
	}
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("ping socket: %w", err)
	}
	f := os.NewFile(uintptr(fd), "ping")
	defer f.Close()
	if p.conn, err = net.FileConn(f); err != nil { // its own copy of fd, with deadlines
		return nil, fmt.Errorf("ping socket: %w", err)
	}
	if p.raw, err = p.conn.(syscall.Conn).SyscallConn(); err != nil {
		p.conn.Close()
		return nil, fmt.Errorf("ping socket: %w", err)
	}
	return p, nil
}

// routeMTU is the MTU of this pod's route to the address: the largest packet it sends
// there without fragmenting.
func (p *pinger) routeMTU() (mtu int, err error) {
	level, opt := unix.IPPROTO_IP, unix.IP_MTU
	if p.v6 {
		level, opt = unix.IPPROTO_IPV6, unix.IPV6_MTU
	}
	cerr := p.raw.Control(func(fd uintptr) { mtu, err = unix.GetsockoptInt(int(fd), level, opt) })
	if err = errors.Join(cerr, err); err != nil {
		return 0, fmt.Errorf("read the route's MTU: %w", err)
	}
	return mtu, nil
}

// exchange sends an echo with big bytes of payload and one with small, each up to pingTries
// times until answered, and reports which were answered.
func (p *pinger) exchange(ctx context.Context, big, small int) (bigAnswered, smallAnswered bool, err error) {
	sizes := map[int]int{1: big, 2: small} // sequence number -> payload
	answered := map[int]bool{}
	buf := make([]byte, big+128)
	for range pingTries {
		for seq, payload := range sizes {
			if answered[seq] {
				continue
			}
			req, err := (&icmp.Message{Type: p.request, Body: &icmp.Echo{Seq: seq, Data: make([]byte, payload)}}).Marshal(nil)
			if err != nil {
				return false, false, err
			}
			if _, err := p.conn.Write(req); err != nil {
				return false, false, fmt.Errorf("ping with %d bytes: %w", payload+p.header, err)
			}
		}
		wait := time.Now().Add(pingWait)
		if d, ok := ctx.Deadline(); ok && d.Before(wait) {
			wait = d
		}
		_ = p.conn.SetReadDeadline(wait)
		for len(answered) < len(sizes) {
			n, err := p.conn.Read(buf)
			if errors.Is(err, unix.EMSGSIZE) {
				// An ICMP "fragmentation needed" for the large echo, on a connected socket.
				return false, answered[2], fmt.Errorf("ping with %d bytes: %w", big+p.header, err)
			}
			if err != nil {
				break // the next try, with what is unanswered
			}
			if seq, ok := p.reply(buf[:n], sizes); ok {
				answered[seq] = true
			}
		}
		if len(answered) == len(sizes) || ctx.Err() != nil {
			break
		}
	}
	return answered[1], answered[2], nil
}

// reply returns the sequence number of b when it is the reply to one of the echoes, as
// large as it was sent.
func (p *pinger) reply(b []byte, sizes map[int]int) (int, bool) {
	m, err := icmp.ParseMessage(p.proto, b)
	if err != nil || (m.Type != ipv4.ICMPTypeEchoReply && m.Type != ipv6.ICMPTypeEchoReply) {
		return 0, false
	}
	e, ok := m.Body.(*icmp.Echo)
	if !ok || len(e.Data) != sizes[e.Seq] {
		return 0, false
	}
	return e.Seq, true
}

// tcpMSS is the largest segment the kernel sends on conn: the route's MTU less the headers,
// or what the other end announced, whichever is smaller.
func tcpMSS(conn net.Conn) (int, error) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return 0, errors.New("not a socket")
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var mss int
	cerr := raw.Control(func(fd uintptr) { mss, err = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_MAXSEG) })
	return mss, errors.Join(cerr, err)
}
