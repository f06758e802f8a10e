package realnode

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// The node's addresses. 198.18.0.0/15 is reserved for network benchmark tests (RFC 2544):
// nothing on a real network uses it, and it is not a private range.
const (
	HostAddress = "198.18.0.1" // host end of the veth: API server, image registry
	NodeAddress = "198.18.0.2" // node end: the node's InternalIP
	linkPrefix  = 30
	// hostLink is the host end's name; the node end is eth0 inside the node's namespace.
	hostLink = "nodeready0"
	// PodSubnet is the bridge's subnet inside the node's namespace.
	PodSubnet = "10.244.0.0/24"
	// ClusterDNS is the kube-dns Service's address, inside the control plane's Service range.
	ClusterDNS = "10.96.0.10"
	// serviceCIDR must match controlplane.ServiceClusterIPRange.
	serviceCIDR = "10.96.0.0/16"
)

// run runs a command and returns its error with its output.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// setupNetwork creates the veth pair between the host and the namespace of pid and sets the
// node's side up: addresses, a route to the Service range, forwarding and bridge netfilter
// (so kube-proxy's rules see pod-to-pod traffic on the bridge), all in that namespace.
func setupNetwork(pid int) error {
	_ = run("ip", "link", "del", hostLink) // left by a killed run; fails when absent
	p := strconv.Itoa(pid)
	in := func(args ...string) error {
		return run("nsenter", append([]string{"--net=/proc/" + p + "/ns/net", "--"}, args...)...)
	}
	steps := []func() error{
		func() error {
			return run("ip", "link", "add", hostLink, "type", "veth", "peer", "name", "eth0", "netns", p)
		},
		func() error {
			return run("ip", "addr", "add", HostAddress+"/"+strconv.Itoa(linkPrefix), "dev", hostLink)
		},
		func() error { return run("ip", "link", "set", hostLink, "up") },
		func() error { return in("ip", "link", "set", "lo", "up") },
		func() error { return in("ip", "addr", "add", NodeAddress+"/"+strconv.Itoa(linkPrefix), "dev", "eth0") },
		func() error { return in("ip", "link", "set", "eth0", "up") },
		// No default route: nothing the node does can leave the machine. The Service range
		// needs a route for the node's own connections; kube-proxy rewrites them.
		func() error { return in("ip", "route", "add", serviceCIDR, "dev", "eth0") },
		func() error { return in("sysctl", "-qw", "net.ipv4.ip_forward=1") },
		func() error { return in("sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=1") },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			_ = run("ip", "link", "del", hostLink)
			return fmt.Errorf("node network: %w", err)
		}
	}
	return nil
}

// teardownNetwork removes the veth pair; it also goes when the namespace ends.
func teardownNetwork() { _ = run("ip", "link", "del", hostLink) }
