// Package datapath proves the podnetwork check on the pod network it is about: clusters of two
// to four real nodes on this machine (Linux, root), each in namespaces of its own, joined by a
// bridge in an underlay namespace, pods networked by flanneld (VXLAN) across them, IPv4 and
// dual-stack. A joining node is released only once its pods reach pods on other nodes, and
// held while they cannot; the first nodes of a cluster bootstrap without it.
//
// Run them with make e2e-multinode.
package datapath
