// Package gates proves the gates end to end (README, Gates): a real control plane with
// nodeready installed from manifests/ (e2e/framework/harness), the real agent binary run by the
// simulated kubelet (e2e/framework/kubelet), and node agents, node conditions, devices and warm-up
// images that the test brings about one at a time. Each test holds that a node stays tainted
// while its gate is not met and is released once it is, reading nodes, pods and Events back
// from the API. TestDRAGateOnV1beta1 runs the dra gate on the oldest supported release,
// which serves resource.k8s.io/v1beta1 only.
//
// Run them with make e2e, or: go test -count=1 -timeout 10m ./suites/gates/ with NODEREADY_BIN
// pointing at a built agent (default <repo>/bin/nodeready).
package gates
