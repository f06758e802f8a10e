// Package admission proves on a real API server that the optional
// MutatingAdmissionPolicies in manifests/node-creation/ put the taint on new
// nodes, and only on the nodes they select, and that manifests/label-to-taint/
// keeps a taint in step with a label both ways; that a rule outside nodeready can own the
// taint; and what the oldest supported Kubernetes release refuses (TestOldestRelease). Every
// manifest is applied with kubectl as shipped, and every assertion reads the Node back from
// the API.
package admission
