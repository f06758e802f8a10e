// Package failure proves end to end what a person sees and what happens when a node does
// not pass (README, Visible state, Failure policy, Runbook): the node condition and the
// Events in `kubectl describe node`, fail-open, replace-node with a Karpenter NodeClaim, and
// the startup taint put back for re-verification. A real control plane with nodeready
// installed from manifests/ (e2e/framework/harness) runs the real agent binary on simulated nodes
// (e2e/framework/kubelet); every test reads nodes, NodeClaims and Events back from the API.
//
// Run them with make e2e, or: go test -count=1 -timeout 10m ./suites/failure/ with NODEREADY_BIN
// pointing at a built agent (default <repo>/bin/nodeready).
package failure
