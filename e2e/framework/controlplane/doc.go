// Package controlplane runs a real, local Kubernetes control plane for tests, the demo and
// benchmarks: etcd, kube-apiserver, kube-controller-manager and kube-scheduler as separate
// processes on loopback, with certificates, ServiceAccount signing keys, RBAC, the Node
// authorizer and the default admission plugins of a real cluster.
//
// The binaries come from scripts/build-control-plane.sh. There is no kubelet: tests create
// Node objects themselves and play the kubelet's part.
package controlplane
