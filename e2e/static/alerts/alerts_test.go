package alerts

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/rules"
)

const testFile = "testdata/nodeready_test.yaml"

// TestAlerts runs the real promtool on the shipped PrometheusRule: `promtool check rules` on
// its groups, then `promtool test rules` with testdata/nodeready_test.yaml, which has every
// alert fire and stay silent (thresholds, a node verified in time, a deleted node, a
// re-verification, fail-open). promtool comes from e2e/build/tools/promtool, built by
// scripts/build-tools.sh (make vet builds it first; here it is found up to date).
func TestAlerts(t *testing.T) {
	repo := framework.RepoRoot(t)
	promtool := framework.BuildTool(t, "promtool")

	groups, err := rules.RuleGroups(filepath.Join(repo, "manifests", "monitoring", "prometheusrule.yaml"))
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rules.yaml"), groups, 0o644))
	tests, err := os.ReadFile(testFile)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, filepath.Base(testFile)), tests, 0o644))

	out, err := exec.Command(promtool, "check", "rules", filepath.Join(dir, "rules.yaml")).CombinedOutput()
	require.NoError(t, err, "promtool check rules:\n%s", out)
	out, err = exec.Command(promtool, "test", "rules", filepath.Join(dir, filepath.Base(testFile))).CombinedOutput()
	assert.NoError(t, err, "promtool test rules:\n%s", out)

	// Every alert is tested both ways, so an alert added without tests fails here.
	fires, silent := testedAlerts(t, tests)
	for _, name := range alertNames(t, groups) {
		assert.Contains(t, fires, name, "no test has %s fire", name)
		assert.Contains(t, silent, name, "no test has %s stay silent", name)
	}
}

// TestRuleGroupsIsStrict: a field the PrometheusRule does not have is an error, not dropped.
func TestRuleGroupsIsStrict(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rule.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata: {name: x}
spec:
  group:
    - name: x
`), 0o644))
	_, err := rules.RuleGroups(path)
	assert.ErrorContains(t, err, "unknown field")
}

func alertNames(t *testing.T, rules []byte) []string {
	t.Helper()
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
			} `json:"rules"`
		} `json:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(rules, &f))
	var names []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				names = append(names, r.Alert)
			}
		}
	}
	require.NotEmpty(t, names)
	return names
}

// testedAlerts returns the alerts that some test expects to fire, and those that some test
// expects to stay silent.
func testedAlerts(t *testing.T, tests []byte) (fires, silent map[string]bool) {
	t.Helper()
	var f struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string           `json:"alertname"`
				ExpAlerts []map[string]any `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	require.NoError(t, yaml.Unmarshal(tests, &f))
	fires, silent = map[string]bool{}, map[string]bool{}
	for _, tc := range f.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	return fires, silent
}
