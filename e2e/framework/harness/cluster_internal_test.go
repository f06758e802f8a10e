package harness

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ApplyConfig checks every setting against the shipped ConfigMap before it runs kubectl, so
// these cases need no control plane. Settings are checked loopback first, then
// Options.Config, then overrides: an error that names the last unknown setting shows that
// every earlier one is known.
func TestApplyConfigUnknownSetting(t *testing.T) {
	repo, err := FindRepoRoot()
	require.NoError(t, err)
	shipped := filepath.Join(repo, "manifests", "02-configmap.yaml")

	tests := []struct {
		name      string
		config    map[string]string
		overrides map[string]string
		unknown   string
	}{
		{name: "override", overrides: map[string]string{"MAX_RETRIES": "2", "RETRY_BACKOF_MAX": "1s"}, unknown: "RETRY_BACKOF_MAX"},
		{name: "Options.Config", config: map[string]string{"CHECK_TIMEOUT": "1s", "DNS_TEST_DOMAIN": "x"}, unknown: "DNS_TEST_DOMAIN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Cluster{repo: repo, config: tt.config}

			err := c.ApplyConfig(t.Context(), tt.overrides)

			assert.EqualError(t, err, "setting "+tt.unknown+": not in "+shipped+", which lists every setting")
		})
	}
}
