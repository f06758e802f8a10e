package alerts

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/rules"
)

// runbooks is where every alert's runbook_url points: docs/runbooks.md in the repository.
const runbooks = "https://github.com/nodeready/nodeready/blob/main/docs/runbooks.md#"

// TestRunbooks: each alert's runbook_url points at its own section of docs/runbooks.md (the
// GitHub anchor of a "## <alert>" heading), and each section there is an alert's. The chart's
// rules are the manifests' (e2e/static/chart), so this holds for both.
func TestRunbooks(t *testing.T) {
	repo := framework.RepoRoot(t)
	groups, err := rules.RuleGroups(filepath.Join(repo, "manifests", "monitoring", "prometheusrule.yaml"))
	require.NoError(t, err)
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `json:"alert"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(groups, &f))

	doc, err := os.ReadFile(filepath.Join(repo, "docs", "runbooks.md"))
	require.NoError(t, err)
	sections := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## (\S+)$`).FindAllStringSubmatch(string(doc), -1) {
		sections[strings.ToLower(m[1])] = true
	}

	alerts := map[string]bool{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			anchor := strings.ToLower(r.Alert)
			alerts[anchor] = true
			assert.Equal(t, runbooks+anchor, r.Annotations["runbook_url"], "runbook_url of %s", r.Alert)
			assert.True(t, sections[anchor], "docs/runbooks.md has no section ## %s", r.Alert)
		}
	}
	require.NotEmpty(t, alerts)
	for s := range sections {
		assert.True(t, alerts[s], "docs/runbooks.md has a section for %s, which is no alert", s)
	}
}
