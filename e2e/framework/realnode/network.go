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
	// ClusterCIDR is the pod network of a set of nodes (Nodes): kube-controller-manager gives
	// each Node a /24 of it, flanneld routes between them.
	ClusterCIDR = "10.244.0.0/16"
	// setPrefix is the underlay's prefix: the host and every node of a set on one bridge.
	setPrefix = 24
	// underlayBridge is the bridge in the underlay namespace; its ports are the host's link
	// (underlayHostPort) and each node's (underlayPort).
	underlayBridge   = "br0"
	underlayHostPort = "host"
	// ClusterDNS is the kube-dns Service's address, inside the control plane's Service range.
	ClusterDNS = "10.96.0.10"
	// serviceCIDR must match controlplane.ServiceClusterIPRange.
	serviceCIDR = "10.96.0.0/16"
)

// A dual-stack set's IPv6 side (ClusterOptions.DualStack). fd00::/8 is unique local (RFC
// 4193): routed nowhere beyond a site, and these exist only in the test's namespaces.
const (
	// ClusterCIDRv6 is the pods' IPv6 network: kube-controller-manager gives each Node a /64.
	ClusterCIDRv6 = "fd00:10:244::/56"
	// ServiceCIDRv6 is the Services' secondary range (--service-cluster-ip-range).
	ServiceCIDRv6 = "fd00:10:96::/112"
	setPrefix6    = 64
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

// nodeAddress is node i's address: NodeAddress for node 0, then the next ones.
func nodeAddress(i int) string { return "198.18.0." + strconv.Itoa(2+i) }

// nodeAddress6 is node i's IPv6 address in a dual-stack set.
func nodeAddress6(i int) string { return "fd00:198:18::" + strconv.FormatInt(int64(2+i), 16) }

func underlayPort(i int) string { return "node" + strconv.Itoa(i) }

// inNetns runs a command in the network namespace of pid.
func inNetns(pid int, args ...string) error {
	return run("nsenter", append([]string{"--net=/proc/" + strconv.Itoa(pid) + "/ns/net", "--"}, args...)...)
}

// setupUnderlay joins the host to a bridge inside the underlay namespace (held by upid) with a
// veth pair: hostLink, with HostAddress/24, is the one link a set of nodes adds to the host;
// the bridge and the nodes' links exist only inside namespaces the test made, and end with them.
func setupUnderlay(upid int) error {
	_ = run("ip", "link", "del", hostLink) // left by a killed run; fails when absent
	steps := [][]string{
		{"ip", "link", "add", hostLink, "type", "veth", "peer", "name", underlayHostPort, "netns", strconv.Itoa(upid)},
		{"ip", "addr", "add", HostAddress + "/" + strconv.Itoa(setPrefix), "dev", hostLink},
		{"ip", "link", "set", hostLink, "up"},
	}
	for _, step := range steps {
		if err := run(step[0], step[1:]...); err != nil {
			_ = run("ip", "link", "del", hostLink)
			return fmt.Errorf("underlay network: %w", err)
		}
	}
	for _, step := range [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"ip", "link", "add", underlayBridge, "type", "bridge"},
		{"ip", "link", "set", underlayBridge, "up"},
		{"ip", "link", "set", underlayHostPort, "master", underlayBridge, "up"},
	} {
		if err := inNetns(upid, step...); err != nil {
			_ = run("ip", "link", "del", hostLink)
			return fmt.Errorf("underlay network: %w", err)
		}
	}
	return nil
}

// joinUnderlay links node i (its namespace held by pid) to the underlay's bridge: eth0 in the
// node with nodeAddress(i)/24, the other end a port of the bridge; then the node's side as
// setupNetwork sets it up, and of a dual-stack set its IPv6 side too.
func joinUnderlay(upid, pid, i int, dualStack bool) error {
	steps := [][]string{
		{"ip", "link", "add", underlayPort(i), "type", "veth", "peer", "name", "eth0", "netns", strconv.Itoa(pid)},
		{"ip", "link", "set", underlayPort(i), "master", underlayBridge, "up"},
	}
	for _, step := range steps {
		if err := inNetns(upid, step...); err != nil {
			return fmt.Errorf("node %d network: %w", i, err)
		}
	}
	if err := nodeSide(pid, nodeAddress(i), setPrefix); err != nil {
		return err
	}
	if !dualStack {
		return nil
	}
	for _, step := range [][]string{
		// nodad: the address is usable at once, not after duplicate address detection.
		{"ip", "-6", "addr", "add", nodeAddress6(i) + "/" + strconv.Itoa(setPrefix6), "dev", "eth0", "nodad"},
		{"ip", "-6", "route", "add", ServiceCIDRv6, "dev", "eth0"},
		{"sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"},
		{"sysctl", "-qw", "net.bridge.bridge-nf-call-ip6tables=1"},
	} {
		if err := inNetns(pid, step...); err != nil {
			return fmt.Errorf("node %d IPv6 network: %w", i, err)
		}
	}
	return nil
}

// nodeSide sets up the node's end, eth0, in the namespace of pid.
func nodeSide(pid int, addr string, prefix int) error {
	for _, step := range [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"ip", "addr", "add", addr + "/" + strconv.Itoa(prefix), "dev", "eth0"},
		{"ip", "link", "set", "eth0", "up"},
		// No default route: nothing the node does can leave the machine. The Service range
		// needs a route for the node's own connections; kube-proxy rewrites them.
		{"ip", "route", "add", serviceCIDR, "dev", "eth0"},
		{"sysctl", "-qw", "net.ipv4.ip_forward=1"},
		{"sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=1"},
	} {
		if err := inNetns(pid, step...); err != nil {
			return fmt.Errorf("node network: %w", err)
		}
	}
	return nil
}

// teardownNetwork removes the veth pair; it also goes when the namespace ends.
func teardownNetwork() { _ = run("ip", "link", "del", hostLink) }
