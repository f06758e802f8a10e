// Package install holds the end-to-end tests of installing nodeready other than with
// `kubectl apply -f manifests/`, each on a real control plane: the Helm chart with `helm
// install` (install_test.go) and the kustomize overlays with `kubectl apply -k`
// (apply_test.go). The checks of the chart and the overlays that need no cluster are in
// e2e/static/chart and e2e/static/kustomize; both use the helpers of e2e/framework/chart
// and e2e/framework/kustomize.
package install
