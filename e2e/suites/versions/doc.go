// Package versions holds what differs between the Kubernetes releases of the version matrix:
// what the oldest minor the README supports (controlplane.FloorKubernetesVersion, built from
// e2e/build/k8s-1.32) refuses or lacks, and the dra gate on its resource.k8s.io/v1beta1. Each
// test starts a control plane of that release with manifests/ installed, and a simulated
// kubelet that reports the control plane's version as its own.
//
// The core scenarios are not here: make e2e-versions runs the same suites (e2e/suites/scenarios,
// and parts of failure, admission and gates) on each other release, with
// NODEREADY_E2E_KUBERNETES (controlplane.VersionEnv) set to it.
//
// Run them with make e2e (which builds the control planes), or: go test -count=1 -timeout 15m
// ./suites/versions/ with NODEREADY_BIN pointing at a built agent.
package versions
