// Package versions runs nodeready's core scenarios against each Kubernetes release of the version
// matrix: the current one (controlplane.KubernetesVersion, built from e2e/build/k8s), the newest
// (controlplane.NewestKubernetesVersion, built the same way from e2e/build/k8s-1.37) and the oldest
// minor the README supports (controlplane.FloorKubernetesVersion, from e2e/build/k8s-1.32). Each
// gets its own control plane with manifests/ installed, and a simulated kubelet that reports the
// control plane's version as its own, as the version skew policy allows no kubelet newer than its
// API server.
//
// The scenarios: a new tainted node verified and released; re-verification after the
// verified label is removed; the own-node admission policy refusing an agent's write to
// another node, with the token the kubelet gives its pod; a bad setting in the ConfigMap
// stopping the agent with a message that names it while the node stays tainted. The
// creation-time taint policy (manifests/node-creation/) is checked per release too: it
// needs MutatingAdmissionPolicy v1.
//
// Run them with make e2e (which builds the three control planes), or: go test -count=1
// -timeout 15m ./suites/versions/ with NODEREADY_BIN pointing at a built agent. The test log ends
// with a table of every scenario per release.
package versions
