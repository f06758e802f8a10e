// Package release holds the checks that keep a release whole: one version, in the repository's
// VERSION file, named by every place that names the agent image (manifests/, the chart, the
// README, the e2e harness), never :latest, and a release workflow that publishes exactly that
// image. They read files only and start no control plane.
package release
