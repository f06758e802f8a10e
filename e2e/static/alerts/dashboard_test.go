package alerts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/rules"
)

const dashboardTests = "testdata/dashboard_test.yaml"

// TestDashboard evaluates every query of the Grafana dashboard (charts/nodeready/dashboards,
// which manifests/monitoring/grafana-dashboard.yaml holds too: e2e/static/chart) with the real
// promtool, against series as kube-state-metrics and the agents export them:
// testdata/dashboard_test.yaml gives the series and, by panel title and query, the samples
// each query must return at the evaluation time, with Grafana's $__range set to the test's
// range. A panel or query without an expectation fails, so does an expectation for a panel
// the dashboard does not have.
func TestDashboard(t *testing.T) {
	repo := framework.RepoRoot(t)
	promtool := framework.BuildTool(t, "promtool")
	queries, err := rules.DashboardQueries(filepath.Join(repo, "charts", "nodeready", "dashboards", "nodeready.json"))
	require.NoError(t, err)

	data, err := os.ReadFile(dashboardTests)
	require.NoError(t, err)
	var in struct {
		Tests []struct {
			Interval string `json:"interval"`
			// Values are quoted: YAML would read 0x10 as the number 16.
			InputSeries []struct {
				Series string `json:"series"`
				Values string `json:"values"`
			} `json:"input_series"`
			EvalTime string `json:"eval_time"`
			Range    string `json:"range"`
			// Panels holds, by panel title and query refId, the samples the query returns.
			Panels map[string]map[string][]map[string]any `json:"panels"`
		} `json:"tests"`
	}
	require.NoError(t, yaml.UnmarshalStrict(data, &in))

	tested := map[string]bool{}
	var out []map[string]any
	for _, tc := range in.Tests {
		var exprTests []map[string]any
		for title, refs := range tc.Panels {
			for ref, samples := range refs {
				q, ok := queries[title+"/"+ref]
				require.True(t, ok, "%s: the dashboard has no panel %q with query %s", dashboardTests, title, ref)
				tested[title+"/"+ref] = true
				if samples == nil {
					samples = []map[string]any{}
				}
				exprTests = append(exprTests, map[string]any{
					"expr":        strings.ReplaceAll(q, "$__range", tc.Range),
					"eval_time":   tc.EvalTime,
					"exp_samples": samples,
				})
			}
		}
		out = append(out, map[string]any{"interval": tc.Interval, "input_series": tc.InputSeries, "promql_expr_test": exprTests})
	}
	for key := range queries {
		assert.True(t, tested[key], "no test of the dashboard's query %s", key)
	}

	file, err := yaml.Marshal(map[string]any{"evaluation_interval": "1m", "tests": out})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "dashboard_test.yaml")
	require.NoError(t, os.WriteFile(path, file, 0o644))
	got, err := exec.Command(promtool, "test", "rules", path).CombinedOutput()
	assert.NoError(t, err, "promtool test rules:\n%s", got)
}
