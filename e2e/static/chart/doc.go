// Package chart tests the Helm chart charts/nodeready with the real helm, built from the Go
// module proxy into .cache/tools/helm (make tools): with default values it renders exactly
// the objects of manifests/, each switch adds exactly the objects of its optional file, a bad
// value fails at install with its name, and the label and taint values move every object that
// names them together. None of this needs a cluster. `helm install` onto the real control
// plane, which verifies a node, is TestHelmInstall in e2e/suites/install; it runs helm with
// this package's helpers (helm.go: RunHelm, SetFlags, ParseObjects, ...).
package chart
