package config_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kelseyhightower/envconfig"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeready/nodeready/checks"
	"github.com/nodeready/nodeready/internal/config"
	"github.com/nodeready/nodeready/internal/envvar"
)

// TestDescribeAgreesWithEnvconfig: envvar.Describe, which the agent's binary links instead of
// envconfig's Usage (see its doc), finds every variable envconfig's own Usage finds in the
// agent's specs, in the same order, with the same name, default and description, and tells
// text from the rest as envconfig's type names do.
func TestDescribeAgreesWithEnvconfig(t *testing.T) {
	specs := []any{&config.Config{}}
	var o checks.Options
	for _, k := range checks.Catalog {
		specs = append(specs, k.Options(&o))
	}
	var want []envvar.Variable
	for _, spec := range specs {
		var out bytes.Buffer
		format := "{{range .}}{{usage_key .}}\x1f{{usage_default .}}\x1f{{usage_description .}}\x1f{{usage_type .}}\x1f{{.Tags.Get \"blank\"}}\n{{end}}"
		require.NoError(t, envconfig.Usagef("", spec, &out, format))
		for line := range strings.Lines(out.String()) {
			f := strings.Split(strings.TrimSuffix(line, "\n"), "\x1f")
			want = append(want, envvar.Variable{Name: f[0], Default: f[1], Description: f[2], Text: f[3] == "String", Blank: f[4]})
		}
	}
	require.NotEmpty(t, want)
	assert.Equal(t, want, envvar.Describe(specs...))
}
