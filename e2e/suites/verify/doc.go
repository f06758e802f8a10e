// Package scenarios holds the end-to-end tests of nodeready, built on e2e/framework/harness: a real
// control plane (e2e/framework/controlplane), the repository's manifests applied with kubectl, and
// the real agent binary run for every pod by a simulated kubelet (e2e/framework/kubelet). Tests
// assert on API objects and on what the kubelet saw of the processes, never on log lines.
//
// Run them with make e2e, or: go test -count=1 -timeout 20m ./suites/scenarios/ with NODEREADY_BIN
// pointing at a built agent (default <repo>/bin/nodeready). NODEREADY_E2E_LOGS keeps every
// log, also after a passing run. NODEREADY_E2E_KUBERNETES=v1.32.5 (or v1.37.2) runs them on
// another Kubernetes release, as make e2e-versions does.
package verify
