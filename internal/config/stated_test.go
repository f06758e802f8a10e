package config_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeready/nodeready/internal/config"
)

// statedDefault is a default that a document states for a variable: where,
// the variable, and the value it states.
type statedDefault struct{ where, name, value string }

// The ways the documents state a variable's default, in prose (docs/*.md, a
// variable in backticks) and in YAML comments (the ConfigMap, values.yaml, the
// variable bare):
//
//	`CHECK_TIMEOUT`, 10s by default      `CLUSTER_DNS_SERVICE` finds it (`auto` by default
//	`SETTLE_TIME` (2s)                   (`CLUSTER_DNS_SERVICE`, `auto`: ...)
//	`NAME` defaults to `VALUE`           `NAME` (default `VALUE`)
//	# ... SETTLE_TIME, 2s by default     # ... (SETTLE_TIME, default 2s)
//
// A value in parentheses or after a comma alone counts when it looks like a
// value (a duration, a number, a word in backticks that is not a variable).
var statedForms = []*regexp.Regexp{
	// NAME ... VALUE by default, within a clause.
	regexp.MustCompile("`?\\b([A-Z][A-Z0-9_]{3,})\\b`?[^.;|`\\n]{0,40}?[ (,]`?([^ `(),]+)`? by default"),
	// NAME defaults to VALUE, NAME (default VALUE), NAME, default VALUE.
	regexp.MustCompile("`?\\b([A-Z][A-Z0-9_]{3,})\\b`?(?: defaults to| \\(default|, default) `?([^ `(),]+)`?"),
	// NAME (VALUE) with a duration or a number.
	regexp.MustCompile("`?\\b([A-Z][A-Z0-9_]{3,})\\b`? \\(`?([0-9][0-9a-z.]*)`?\\)"),
	// (`NAME`, `VALUE`) or (`NAME`, `VALUE`: ...): a value in backticks.
	regexp.MustCompile("\\(`([A-Z][A-Z0-9_]{3,})`, `([^`]+)`[):]"),
}

// findStated lists the defaults text states for the variables of known.
func findStated(where, text string, known map[string]string) []statedDefault {
	var out []statedDefault
	for _, form := range statedForms {
		for _, m := range form.FindAllStringSubmatch(text, -1) {
			name, value := m[1], m[2]
			if _, ok := known[name]; !ok {
				continue // not a variable: VERSION, NODEREADY_BIN, ...
			}
			if _, isVar := known[value]; isVar {
				continue // a list of variables: (`TAINT_KEY`, `TAINT_VALUE`, ...)
			}
			out = append(out, statedDefault{where, name, value})
		}
	}
	return out
}

// sameDefault compares a stated value with the code's default: durations by
// their length (300s is 5m), anything else as written.
func sameDefault(stated, code string) bool {
	if stated == code {
		return true
	}
	a, errA := time.ParseDuration(stated)
	b, errB := time.ParseDuration(code)
	return errA == nil && errB == nil && a == b
}

// defaults maps every variable to its default in the code: the agent's and the
// checks' (through the catalog, config.Variables).
func defaults() map[string]string {
	m := map[string]string{}
	for _, v := range config.Variables() {
		m[v.Name] = v.Default
	}
	return m
}

// yamlComments returns the comment lines of a YAML file, one per line.
func yamlComments(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var b strings.Builder
	for line := range strings.Lines(string(data)) {
		if _, comment, ok := strings.Cut(line, "#"); ok {
			b.WriteString(comment)
		}
	}
	return b.String()
}

// TestStatedDefaultsMatchCode: every default the documents state for a variable, in the
// prose of docs/ and README.md and in the comments of the ConfigMap and values.yaml,
// is the code's, and every value of the ConfigMap (which lists each setting with its
// default) is the code's default, as the configuration table is
// (TestREADMEDocumentsEveryVariable).
func TestStatedDefaultsMatchCode(t *testing.T) {
	code := defaults()
	var stated []statedDefault
	docs, err := filepath.Glob("../../docs/*.md")
	require.NoError(t, err)
	for _, path := range append(docs, "../../README.md") {
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		stated = append(stated, findStated(filepath.Base(path), string(data), code)...)
	}
	for _, path := range []string{"../../manifests/02-configmap.yaml", "../../charts/nodeready/values.yaml"} {
		stated = append(stated, findStated(filepath.Base(path)+" comments", yamlComments(t, path), code)...)
	}
	require.NotEmpty(t, stated, "the documents state defaults: the forms find them")
	t.Logf("%d stated defaults: %v", len(stated), stated)
	for _, s := range stated {
		assert.True(t, sameDefault(s.value, code[s.name]), "%s states %s's default as %q; the code's is %q", s.where, s.name, s.value, code[s.name])
	}

	data, err := os.ReadFile("../../manifests/02-configmap.yaml")
	require.NoError(t, err)
	entries := regexp.MustCompile(`(?m)^  ([A-Z][A-Z0-9_]+): "(.*)"$`).FindAllStringSubmatch(string(data), -1)
	require.NotEmpty(t, entries)
	for _, e := range entries {
		def, ok := code[e[1]]
		if assert.True(t, ok, "02-configmap.yaml sets %s, which the agent does not read", e[1]) {
			assert.True(t, sameDefault(e[2], def), "02-configmap.yaml sets %s=%q; the code's default is %q", e[1], e[2], def)
		}
	}
}

// TestStatedDefaultsCatchDrift: the forms find the claims that were once wrong, so the
// test above fails on the next one.
func TestStatedDefaultsCatchDrift(t *testing.T) {
	code := defaults()
	for _, text := range []string{
		"the cluster DNS Service (`CLUSTER_DNS_SERVICE`, `kube-system/kube-dns`) have no ready endpoint",
		"a cluster DNS Service that `CLUSTER_DNS_SERVICE` names (`kube-system/kube-dns` by default; another",
		"until its deadline (`CHECK_TIMEOUT`, 3s by default)",
		"an agent ends about `SETTLE_TIME` (5s) after it releases its node",
		"`MAX_RETRIES` defaults to `3`",
		"# keep SETTLE_TIME, 5s by default, below",
	} {
		found := findStated("text", text, code)
		if assert.Len(t, found, 1, text) {
			assert.False(t, sameDefault(found[0].value, code[found[0].name]), "%q: %+v", text, found[0])
		}
	}
	assert.Empty(t, findStated("text", "(`TAINT_KEY`, `TAINT_VALUE`, `TAINT_EFFECT`)", code), "a list of variables states no default")
	assert.True(t, sameDefault("5m", "300s"))
}
