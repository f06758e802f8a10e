// Package verify proves the core promise: a new node is held by the startup taint until its
// agent has verified it, then released in one write (label on, only the startup taint off),
// and the agent goes away; a node that fails stays held until it heals; nodes that predate the
// install are never held. It proves it wherever nodes come from: simulated nodes running the
// real agent binary (TestNodeReady, TestInstallOnARunningCluster), nodes the real Karpenter
// launches (TestKarpenter), and a real kubelet with containerd, kube-proxy and CoreDNS
// (TestRealNode, Linux and root). Tests assert on API objects, on every version of the nodes
// seen on a watch and on what the kubelet saw of the processes, never on log lines. What
// people see of it is proven too: the kubectl plugin, run as a user runs it, tells each
// state, releases and re-verifies a node (TestNodeReady, golden output in testdata/).
//
// Run them with make e2e, or: go test -count=1 -timeout 60m ./suites/verify/ with NODEREADY_BIN
// pointing at a built agent (default <repo>/bin/nodeready) and NODEREADY_PLUGIN_BIN at a built
// kubectl plugin (make plugin; else the test builds it). NODEREADY_E2E_LOGS keeps every
// log, also after a passing run. NODEREADY_E2E_KUBERNETES=v1.32.5 (or v1.37.2) runs them on
// another Kubernetes release, as make e2e-versions does with TestNodeReady.
package verify
