// Package kubelet simulates the kubelet of a set of nodes for end-to-end tests: it registers
// Nodes and keeps them healthy (status heartbeat and Lease), watches the pods bound to them,
// and runs the real nodeready binary as a process for each such pod, with the environment,
// credentials, probes, status reporting, restarts and graceful termination that a real
// kubelet gives a container.
//
// Processes share the host's network namespace, unlike pods. So that several agents can run
// side by side, each process gets its own loopback port for METRICS_PORT, and the pod's
// probes are sent to that port.
package kubelet
