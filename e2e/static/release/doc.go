// Package release holds the checks that keep a release whole: one version, in the repository's
// VERSION file, named by every place that names the agent image (manifests/, the chart, the
// README, the e2e harness), never :latest; a release workflow that publishes exactly what
// `make release` builds; and a release that is the same bytes from two clones. They start no
// control plane; all but TestReleaseReproducible, which builds the release twice, read files only.
package release
