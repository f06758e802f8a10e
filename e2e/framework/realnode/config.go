package realnode

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// containerdConfig: state in the node's own /run, everything else under dir. Images come
// over plain HTTP from the test's loopback-free registry at registry (host:port).
func containerdConfig(dir, registry, sandboxImage string) string {
	return fmt.Sprintf(`version = 3
root = %[1]q
state = "/run/containerd"

[grpc]
  address = %[2]q

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = %[3]q
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = %[4]q

[plugins.'io.containerd.transfer.v1.local']
  config_path = %[4]q

[plugins.'io.containerd.cri.v1.runtime']
  # Root lacks CAP_SYS_RESOURCE in some VMs; without this runc fails every sandbox there.
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = %[5]q
`, filepath.Join(dir, "root"), socketPath(dir), sandboxImage, filepath.Join(dir, "certs.d"), filepath.Join(dir, "cni"))
}

func socketPath(containerdDir string) string { return filepath.Join(containerdDir, "containerd.sock") }

// registryHosts tells containerd that the registry speaks plain HTTP.
func registryHosts(registry string) string {
	return fmt.Sprintf("server = \"http://%[1]s\"\n\n[host.\"http://%[1]s\"]\n  capabilities = [\"pull\", \"resolve\"]\n", registry)
}

// mirrorHosts sends containerd's pulls of host's images to the registry (host:port, plain
// HTTP) first; host itself stays the server, as with a mirror of a public registry.
func mirrorHosts(host, registry string) string {
	return fmt.Sprintf("server = \"https://%s\"\n\n[host.\"http://%s\"]\n  capabilities = [\"pull\", \"resolve\"]\n", host, registry)
}

// cniConfig: one bridge with host-local addresses, pods masqueraded to the node's address.
const cniConfig = `{
  "cniVersion": "1.0.0",
  "name": "nodeready",
  "plugins": [{
    "type": "bridge",
    "bridge": "cni0",
    "isGateway": true,
    "ipMasq": true,
    "hairpinMode": true,
    "ipam": {"type": "host-local", "ranges": [[{"subnet": "` + PodSubnet + `"}]], "routes": [{"dst": "0.0.0.0/0"}]}
  }]
}
`

// flannelNetConf is flanneld's net-conf.json: the cluster's pod network over VXLAN (without a
// Backend flanneld would use udp), and of a dual-stack set its IPv6 network too.
func flannelNetConf(dualStack bool) string {
	ipv6 := ""
	if dualStack {
		ipv6 = `"EnableIPv6": true, "IPv6Network": "` + ClusterCIDRv6 + `", `
	}
	return `{"Network": "` + ClusterCIDR + `", ` + ipv6 + `"Backend": {"Type": "vxlan"}}` + "\n"
}

// flannelCNIConfig is the conflist the flannel CNI plugin would hand to the bridge plugin from
// flanneld's subnet.env (FLANNEL_NETWORK, FLANNEL_SUBNET, FLANNEL_MTU, FLANNEL_IPMASQ): that
// plugin is not among the CNI plugins installed here, so its delegation is written out as
// kube-flannel's manifest configures it (bridge cni0 as the pods' default gateway, hairpin),
// with ipMasq off when flanneld masquerades, and the portmap plugin left out.
func flannelCNIConfig(subnetEnv string) (string, error) {
	env := map[string]string{}
	for line := range strings.Lines(subnetEnv) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			env[k] = v
		}
	}
	for _, k := range []string{"FLANNEL_NETWORK", "FLANNEL_SUBNET", "FLANNEL_MTU", "FLANNEL_IPMASQ"} {
		if env[k] == "" {
			return "", fmt.Errorf("subnet.env has no %s: %q", k, subnetEnv)
		}
	}
	// FLANNEL_SUBNET is the bridge's address with the node's prefix (10.244.1.1/24): host-local
	// wants the subnet. A dual-stack flanneld adds FLANNEL_IPV6_SUBNET and FLANNEL_IPV6_NETWORK,
	// and the plugin a second range and route.
	type subnetRange struct {
		Subnet string `json:"subnet"`
	}
	type route struct {
		Dst string `json:"dst"`
	}
	var ranges [][]subnetRange
	var routes []route
	for _, family := range [][2]string{{"FLANNEL_SUBNET", "FLANNEL_NETWORK"}, {"FLANNEL_IPV6_SUBNET", "FLANNEL_IPV6_NETWORK"}} {
		if env[family[0]] == "" {
			continue
		}
		_, subnet, err := net.ParseCIDR(env[family[0]])
		if err != nil {
			return "", fmt.Errorf("%s: %w", family[0], err)
		}
		ranges = append(ranges, []subnetRange{{subnet.String()}})
		routes = append(routes, route{env[family[1]]})
	}
	ipam, err := json.Marshal(map[string]any{"type": "host-local", "ranges": ranges, "routes": routes})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "cbr0",
  "plugins": [{
    "type": "bridge",
    "bridge": "cni0",
    "isGateway": true,
    "isDefaultGateway": true,
    "hairpinMode": true,
    "ipMasq": %t,
    "mtu": %s,
    "ipam": %s
  }]
}
`, env["FLANNEL_IPMASQ"] != "true", env["FLANNEL_MTU"], ipam), nil
}

// kubeletConfig registers the node with taints; cgroupfs and failCgroupV1: false because the
// machine has cgroup v1 and no systemd; every path under dir. The node shares the host's disk
// with everything else on it: eviction and image garbage collection are held back so that
// neither acts on a test's pods because of other work on the machine. The kubelet accepts only
// clients with a certificate of the cluster CA, and the API server has none: kubectl logs and
// exec do not reach it; tests read the container logs the kubelet writes (Node.PodLogsDir).
func kubeletConfig(dir, caFile, runtimeSocket, cgroupRoot, address string, taints []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %q
containerRuntimeEndpoint: unix://%s
address: %s
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %q}
authorization:
  mode: AlwaysAllow
clusterDomain: cluster.local
clusterDNS: [%s]
resolvConf: %q
podLogsDir: %q
volumePluginDir: %q
failSwapOn: false
serializeImagePulls: false
evictionHard: {memory.available: 50Mi, nodefs.available: 1%%, imagefs.available: 1%%, nodefs.inodesFree: 1%%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`, cgroupRoot, runtimeSocket, address, caFile, ClusterDNS, filepath.Join(dir, "resolv.conf"),
		filepath.Join(dir, "pod-logs"), filepath.Join(dir, "volume-plugins"))
	if len(taints) > 0 {
		b.WriteString("registerWithTaints:\n")
		for _, t := range taints {
			key, rest, _ := strings.Cut(t, "=")
			value, effect, _ := strings.Cut(rest, ":")
			fmt.Fprintf(&b, "- {key: %q, value: %q, effect: %q}\n", key, value, effect)
		}
	}
	return b.String()
}

// kubeProxyConfig: iptables mode; conntrack limits left as the machine has them (0).
func kubeProxyConfig(kubeconfig, nodeName, address, clusterCIDRs string) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: %q}
hostnameOverride: %q
clusterCIDR: %q
bindAddress: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, kubeconfig, nodeName, clusterCIDRs, address)
}

// writeFiles writes path → content, creating directories.
func writeFiles(files map[string]string) error {
	for path, content := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}
