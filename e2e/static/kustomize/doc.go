// Package kustomize tests the kustomize base (manifests/Kustomization), the components of the
// optional parts and the overlays in kustomize/ with the real kubectl: every overlay renders
// to what it promises (render_test.go), with no cluster. e2e/suites/install applies the
// example overlay, with another image, namespace and keys, with `kubectl apply -k` on a real
// control plane and has a new node verified (apply_test.go); it uses the keys, the kubectl and
// the prefixed overlay of overlays.go.
package kustomize
