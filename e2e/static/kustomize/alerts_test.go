package kustomize_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/kustomize"
	"github.com/nodeready/nodeready/e2e/framework/rules"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// movedEffect is the startup taint's effect in keysWithAlertsOverlay, other than the
// default, so that the test sees it move too.
const movedEffect = "NoExecute"

// movedLabelMetric is kube-state-metrics' name of kustomize.NewLabel.
const movedLabelMetric = "label_example_com_verified"

// keysWithAlertsOverlay writes an overlay of manifests/ with the monitoring component and the
// keys component (the new label, the new taint with effect NoExecute), as a user's own
// overlay might, and returns its directory.
func keysWithAlertsOverlay(t *testing.T, repo string) string {
	t.Helper()
	dir := t.TempDir()
	rel := func(p string) string {
		r, err := filepath.Rel(dir, filepath.Join(repo, p))
		require.NoError(t, err)
		return r
	}
	files := map[string]string{
		"kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n" +
			"resources:\n  - " + rel("manifests") + "\n  - settings.yaml\n" +
			"components:\n  - " + rel("manifests/monitoring") + "\n  - " + rel("kustomize/components/keys") + "\n",
		"settings.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: nodeready-kustomize\n  annotations:\n" +
			"    config.kubernetes.io/local-config: \"true\"\ndata:\n" +
			"  verifiedLabel: " + kustomize.NewLabel + "\n  verifiedLabelMetric: " + movedLabelMetric + "\n" +
			"  taintKey: " + kustomize.NewTaint + "\n  taintValue: \"true\"\n  taintEffect: " + movedEffect + "\n",
	}
	for name, data := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644))
	}
	return dir
}

// TestKeysMoveTheAlerts: with the monitoring component, the keys component moves the alerts'
// keys as the chart's alerts follow its values: the taint's key and effect in the
// kube_node_spec_taint selectors and the descriptions, and the label as kube-state-metrics
// names it in the kube_node_labels selectors; none of the defaults is left in the
// PrometheusRule. The moved rules pass `promtool check rules`, and the promtool tests of the
// shipped rules (e2e/static/alerts), their series and descriptions given the moved keys,
// pass on them: every alert fires and stays silent as the shipped one does.
func TestKeysMoveTheAlerts(t *testing.T) {
	repo := framework.RepoRoot(t)
	objs := render(t, keysWithAlertsOverlay(t, repo))
	rule := find(t, objs, "PrometheusRule", "nodeready")

	exprs := map[string]string{}
	descriptions := map[string]string{}
	ruleList, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	for _, g := range ruleList {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			m := r.(map[string]any)
			name, _ := m["alert"].(string)
			exprs[name], _ = m["expr"].(string)
			descriptions[name], _, _ = unstructured.NestedString(m, "annotations", "description")
		}
	}
	selector := `kube_node_spec_taint{key="` + kustomize.NewTaint + `", effect="` + movedEffect + `"}`
	assert.Equal(t, 1, strings.Count(exprs["NodeReadyStartupTaintHeld"], selector), exprs["NodeReadyStartupTaintHeld"])
	assert.Equal(t, 3, strings.Count(exprs["NodeReadyReleasesStopped"], selector), exprs["NodeReadyReleasesStopped"])
	for _, alert := range []string{"NodeReadyStartupTaintHeld", "NodeReadyReleasesStopped"} {
		assert.Contains(t, descriptions[alert], `the taint {key="`+kustomize.NewTaint+`", effect="`+movedEffect+`"}`, alert)
	}
	assert.Regexp(t, `kube_node_labels\{\s*`+movedLabelMetric+`\s*=~"true\|failed-open"\}`, exprs["NodeReadyNodeNotVerified"])
	assert.Regexp(t, `kube_node_labels\{\s*`+movedLabelMetric+`\s*="failed-open"\}`, exprs["NodeReadyFailedOpen"])
	assert.Contains(t, descriptions["NodeReadyFailedOpen"], `remove its label "`+kustomize.NewLabel+`"`)

	// None of the defaults is left (the condition node-ready/Verified is another name).
	for _, old := range []string{wellknown.TaintKey, wellknown.VerifiedLabel, "node_ready_verified", `"` + string(wellknown.TaintEffect) + `"`} {
		assertNowhere(t, []*unstructured.Unstructured{rule}, old)
	}

	// The moved rules are valid, and behave as the shipped ones on the moved series.
	promtool := framework.BuildTool(t, "promtool")
	dir := t.TempDir()
	data, err := rule.MarshalJSON()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rule.json"), data, 0o644))
	groups, err := rules.RuleGroups(filepath.Join(dir, "rule.json"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rules.yaml"), groups, 0o644))
	out, err := exec.Command(promtool, "check", "rules", filepath.Join(dir, "rules.yaml")).CombinedOutput()
	require.NoError(t, err, "promtool check rules:\n%s", out)

	tests, err := os.ReadFile(filepath.Join(repo, "e2e", "static", "alerts", "testdata", "nodeready_test.yaml"))
	require.NoError(t, err)
	moved := strings.NewReplacer(
		wellknown.TaintKey, kustomize.NewTaint,
		`"`+string(wellknown.TaintEffect)+`"`, `"`+movedEffect+`"`,
		"label_node_ready_verified", movedLabelMetric,
		wellknown.VerifiedLabel, kustomize.NewLabel,
	).Replace(string(tests))
	require.NotEqual(t, string(tests), moved)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nodeready_test.yaml"), []byte(moved), 0o644))
	out, err = exec.Command(promtool, "test", "rules", filepath.Join(dir, "nodeready_test.yaml")).CombinedOutput()
	assert.NoError(t, err, "promtool test rules on the moved alerts:\n%s", out)
}
