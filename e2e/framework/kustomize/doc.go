// Package kustomize has what the tests of the kustomize overlays share: the keys the example
// overlays set, the control plane build's kubectl, and an overlay with a name prefix written
// beside the repository's. e2e/static/kustomize renders the overlays; e2e/suites/install
// applies them to a control plane.
package kustomize
