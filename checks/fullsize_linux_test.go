package checks_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/nodeready/nodeready/checks"
)

// TestPingFullSizeSmallerPath: the pod's route sends 1500-byte packets and a router on the
// way forwards 1400 at most, answering larger ones with ICMP "fragmentation needed" (IPv6
// "packet too big"), as during a change of the pod network's MTU. That is path-MTU discovery
// working: the probe proves the path's size both ways and says the path is smaller, never a
// blackhole. A router that drops large packets and says nothing is one. Three network
// namespaces (this pod, the router, the other pod); needs root.
func TestPingFullSizeSmallerPath(t *testing.T) {
	pod, router := pathWithRouter(t, 1400)
	to := map[string]netip.Addr{"IPv4": netip.MustParseAddr("10.99.2.2"), "IPv6": netip.MustParseAddr("fd99:2::2")}

	// First the router drops what it cannot forward and sends no ICMP: a blackhole. (In this
	// order: the kernel keeps a path MTU it learned.)
	nsRun(t, router, "iptables", "-I", "OUTPUT", "-p", "icmp", "--icmp-type", "fragmentation-needed", "-j", "DROP")
	nsRun(t, router, "ip6tables", "-I", "OUTPUT", "-p", "icmpv6", "--icmpv6-type", "packet-too-big", "-j", "DROP")
	for _, family := range []string{"IPv4", "IPv6"} {
		t.Run(family+" blackhole", func(t *testing.T) {
			_, err := pingFrom(t, pod, to[family])
			require.ErrorIs(t, err, checks.ErrFullSizeLost)
			assert.ErrorContains(t, err, "no answer to 1500-byte pings with don't-fragment set")
		})
	}

	nsRun(t, router, "iptables", "-D", "OUTPUT", "-p", "icmp", "--icmp-type", "fragmentation-needed", "-j", "DROP")
	nsRun(t, router, "ip6tables", "-D", "OUTPUT", "-p", "icmpv6", "--icmpv6-type", "packet-too-big", "-j", "DROP")
	for _, family := range []string{"IPv4", "IPv6"} {
		t.Run(family, func(t *testing.T) {
			size, err := pingFrom(t, pod, to[family])
			require.ErrorIs(t, err, checks.ErrPathSmaller, "path-MTU discovery, not a blackhole")
			assert.NotErrorIs(t, err, checks.ErrFullSizeLost)
			assert.Equal(t, 1400, size, "the path's MTU, proven both ways")
			assert.ErrorContains(t, err, "this pod's route sends 1500-byte packets, the path to "+to[family].String()+" carries 1400")
		})
	}
}

// pathWithRouter makes three network namespaces, each held by a process of its own: the pod
// (10.99.1.2, fd99:1::2, MTU 1500), a router, and the peer (10.99.2.2, fd99:2::2) behind a
// link of mtu. It returns the pod's and the router's processes' ids; they end with the test.
func pathWithRouter(t *testing.T, mtu int) (pod, router int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces")
	}
	for _, tool := range []string{"ip", "unshare", "nsenter", "iptables", "ip6tables"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
	netns := func() int {
		cmd := exec.Command("unshare", "--net", "sleep", "600")
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		// unshare has made the namespace once its process runs sleep.
		require.Eventually(t, func() bool {
			own, err1 := os.Readlink("/proc/self/ns/net")
			its, err2 := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid))
			exe, err3 := os.Readlink(fmt.Sprintf("/proc/%d/exe", cmd.Process.Pid))
			return err1 == nil && err2 == nil && err3 == nil && own != its && strings.HasSuffix(exe, "/sleep")
		}, 5*time.Second, 10*time.Millisecond)
		return cmd.Process.Pid
	}
	pod, router, peer := netns(), netns(), netns()
	pid := strconv.Itoa
	run(t, "ip", "link", "add", "r0", "netns", pid(router), "type", "veth", "peer", "name", "eth0", "netns", pid(pod))
	run(t, "ip", "link", "add", "r1", "netns", pid(router), "type", "veth", "peer", "name", "eth0", "netns", pid(peer))
	nsRun(t, router, "ip", "link", "set", "r1", "mtu", strconv.Itoa(mtu))
	nsRun(t, peer, "ip", "link", "set", "eth0", "mtu", strconv.Itoa(mtu))
	for _, ns := range []struct {
		pid   int
		links map[string][2]string
		via   [2]string
	}{
		{pod, map[string][2]string{"eth0": {"10.99.1.2/24", "fd99:1::2/64"}}, [2]string{"10.99.1.1", "fd99:1::1"}},
		{peer, map[string][2]string{"eth0": {"10.99.2.2/24", "fd99:2::2/64"}}, [2]string{"10.99.2.1", "fd99:2::1"}},
		{router, map[string][2]string{"r0": {"10.99.1.1/24", "fd99:1::1/64"}, "r1": {"10.99.2.1/24", "fd99:2::1/64"}}, [2]string{}},
	} {
		nsRun(t, ns.pid, "ip", "link", "set", "lo", "up")
		for link, addrs := range ns.links {
			nsRun(t, ns.pid, "ip", "addr", "add", addrs[0], "dev", link)
			nsRun(t, ns.pid, "ip", "-6", "addr", "add", addrs[1], "dev", link, "nodad")
			// No duplicate address detection: an address is usable at once.
			nsRun(t, ns.pid, "sysctl", "-qw", "net.ipv6.conf."+link+".accept_dad=0")
			nsRun(t, ns.pid, "ip", "link", "set", link, "up")
		}
		if ns.via[0] != "" {
			nsRun(t, ns.pid, "ip", "route", "add", "default", "via", ns.via[0])
			nsRun(t, ns.pid, "ip", "-6", "route", "add", "default", "via", ns.via[1])
		}
	}
	nsRun(t, router, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1")
	// A pod may open a ping socket, as containerd 2 lets every group.
	nsRun(t, pod, "sysctl", "-qw", "net.ipv4.ping_group_range=0 2147483647")
	return pod, router
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	require.NoError(t, err, "%s %s: %s", name, strings.Join(args, " "), out)
}

// nsRun runs a program in the network namespace of pid.
func nsRun(t *testing.T, pid int, name string, args ...string) {
	t.Helper()
	run(t, "nsenter", append([]string{"-t", strconv.Itoa(pid), "-n", name}, args...)...)
}

// pingFrom runs checks.PingFullSize from a socket made in the network namespace of pid: the
// goroutine's locked thread enters it and is not unlocked, so it ends with the goroutine
// instead of going back to the pool in another namespace.
func pingFrom(t *testing.T, pid int, ip netip.Addr) (int, error) {
	t.Helper()
	type result struct {
		size int
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		f, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err == nil {
			err = unix.Setns(int(f.Fd()), unix.CLONE_NEWNET)
			f.Close()
		}
		if err != nil {
			ch <- result{err: fmt.Errorf("setns: %w", err)}
			return
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		size, err := checks.PingFullSize(ctx, ip)
		ch <- result{size, err}
	}()
	r := <-ch
	return r.size, r.err
}
