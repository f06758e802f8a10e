// Package chart tests the Helm chart charts/nodeready with the real helm, built from the Go
// module proxy into .cache/tools/helm (make tools): with default values it renders exactly
// the objects of manifests/, each switch adds exactly the objects of its optional file, a bad
// value fails at install with its name, the label and taint values move every object that
// names them together, and `helm install` onto the real control plane verifies a node.
package chart
