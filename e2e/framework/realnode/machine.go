package realnode

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// MachineState describes the machine-wide state a real node could leave behind: the host's
// iptables and ip6tables chains of Kubernetes, CNI and flannel, its ipsets, IPv4 and IPv6 forwarding, the
// kernel settings the kubelet changes, the paths containerd, the CNI plugins and the kubelet
// use by default, the node's cgroups and its link. Tests compare it before and after a real node.
func MachineState() string {
	var b strings.Builder
	for _, save := range []string{"iptables-save", "ip6tables-save"} {
		if out, err := exec.Command(save).Output(); err == nil {
			for line := range strings.Lines(string(out)) {
				if strings.Contains(line, "KUBE-") || strings.Contains(line, "CNI-") || strings.Contains(line, "FLANNEL") {
					fmt.Fprintf(&b, "%s: %s", save, line)
				}
			}
		}
	}
	// kube-router's ipsets (StartKubeRouter) belong to the node's network namespace, as its
	// chains do: none may reach the host's.
	if out, err := exec.Command("ipset", "list", "-n").Output(); err == nil {
		for line := range strings.Lines(string(out)) {
			fmt.Fprintf(&b, "ipset: %s", line)
		}
	}
	for _, k := range append([]string{"net/ipv4/ip_forward", "net/ipv6/conf/all/forwarding"}, kernelTunables...) {
		v, _ := os.ReadFile(filepath.Join("/proc/sys", k))
		fmt.Fprintf(&b, "sysctl %s=%s\n", k, strings.TrimSpace(string(v)))
	}
	for _, p := range []string{"/run/containerd", "/run/netns", "/var/lib/cni", "/var/lib/kubelet",
		"/var/lib/containerd", "/var/log/pods", "/var/log/containers", "/etc/cni"} {
		if _, err := os.Stat(p); err == nil {
			fmt.Fprintf(&b, "exists: %s\n", p)
		}
	}
	if dirs, err := hierarchies(); err == nil {
		for _, h := range dirs {
			if _, err := os.Stat(filepath.Join(h, CgroupRoot)); err == nil {
				fmt.Fprintf(&b, "cgroup: %s\n", filepath.Join(h, CgroupRoot))
			}
		}
	}
	if _, err := os.Stat(filepath.Join("/sys/class/net", hostLink)); err == nil {
		fmt.Fprintf(&b, "link: %s\n", hostLink)
	}
	if data, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for line := range strings.Lines(string(data)) {
			if strings.Contains(line, "nodeready-realnode") || strings.Contains(line, " nodeready ") {
				fmt.Fprintf(&b, "mount: %s", line)
			}
		}
	}
	return b.String()
}
