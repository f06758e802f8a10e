// Package realnode runs a real Kubernetes node on this machine for the e2e tests: containerd
// with runc and the bridge CNI plugin, kubelet and kube-proxy (iptables mode), all inside a
// network and mount namespace of their own, joined to the control plane by a veth pair.
//
// Layout: the host end of the veth pair has HostAddress (198.18.0.0/15 is reserved for
// network tests, so it collides with no real network), where the control plane's API server
// and the test's image registry listen; the node end has NodeAddress, the node's InternalIP.
// Pods get addresses of PodSubnet on a bridge inside the node's namespace and are masqueraded
// to NodeAddress, so the host needs no route to them. kube-proxy's Service rules,
// ip_forward and the kubelet's iptables chains all live in the node's namespace.
//
// Machine-wide state, and how it is put back on every exit:
//   - mounts and files: the node's mount namespace has its own /run (so /run/containerd and
//     /run/netns), /var/log and /var/lib (/var/lib/cni); the kubelet's and containerd's mounts
//     live and die with it, their other files are in the node's work directory;
//   - cgroups: everything of the node (daemons, shims, containers) runs under CgroupRoot in
//     every cgroup hierarchy; Stop kills what is left there and removes the cgroups;
//   - sysctls: the kernel settings the kubelet changes are saved and put back;
//   - processes: the daemons die with the test process (Pdeathsig); shims and containers that
//     outlive a killed test are found in CgroupRoot and killed by the next Start or by Clean.
//
// Several nodes (PrepareNodes, ClusterOptions.Nodes): node i is nodeAddress(i) with the cgroup
// root nodeCgroup(i), a work directory and namespaces of its own; the nodes' veth pairs end on
// a bridge inside an underlay network namespace, which the host joins with hostLink
// (HostAddress/24), so the host gains one link, as with one node. kube-controller-manager gives
// each Node a pod CIDR of ClusterCIDR and flanneld (VXLAN) runs in each node's namespaces; the
// CNI configuration is written from its subnet.env. The set holds the lock and puts the
// machine back as one node does; the underlay and all in it end with its namespace. A
// dual-stack set (ClusterOptions.DualStack) adds an IPv6 side to all of it: nodeAddress6(i) on
// the underlay, a pod CIDR of ClusterCIDRv6 per Node, Services in ServiceCIDRv6, a second
// flanneld VXLAN device; IPv4 stays the primary family.
//
// Only one real node, or one set, runs on a machine at a time (fixed names and addresses):
// Prepare and PrepareNodes wait for the one before to stop.
package realnode
