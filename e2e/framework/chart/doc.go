// Package chart renders and installs the Helm chart charts/nodeready with the real helm,
// built from the Go module proxy into .cache/tools/helm (make tools), and reads what it
// renders as objects: for e2e/static/chart, which compares the rendering with manifests/,
// and e2e/suites/install, which installs it onto a control plane.
package chart
