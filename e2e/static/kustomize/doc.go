// Package kustomize tests the kustomize base (manifests/Kustomization), the components of the
// optional parts and the overlays in kustomize/ with the real kubectl: every overlay renders
// to what it promises (render_test.go), and `kubectl apply -k` of the example overlay, with
// another image, namespace and keys, verifies a new node on a real control plane
// (apply_test.go).
package kustomize
