package plugin

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeready/nodeready/internal/config"
	"github.com/nodeready/nodeready/internal/config/configtest"
)

// TestKeysRefusedAsTheAgentRefusesThem: a ConfigMap value of a key the plugin judges
// nodes by that the agent would refuse, the plugin refuses too, naming the same variable;
// one the agent takes, the plugin takes.
func TestKeysRefusedAsTheAgentRefusesThem(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		refused     bool
	}{
		{"TAINT_KEY", "not a key", true},
		{"TAINT_KEY", "example.com/unverified", false},
		{"TAINT_VALUE", "not a value", true},
		{"TAINT_EFFECT", "NoWay", true},
		{"TAINT_EFFECT", "NoExecute", false},
		{"EXTRA_TAINTS", "bad taint", true},
		{"EXTRA_TAINTS", "example.com/net=not a value:NoSchedule", true},
		{"EXTRA_TAINTS", "example.com/net:Sometimes", true},
		{"EXTRA_TAINTS", "example.com/net=false:NoSchedule, example.com/gpu:NoExecute", false},
		{"VERIFIED_LABEL", "not/a/label", true},
		{"VERIFIED_LABEL_VALUE", "not a value", true},
		{"VERIFIED_LABEL_VALUE", "yes", false},
		{"REVERIFY_TAINT", "maybe", true},
		{"REVERIFY_TAINT", "true", false},
	} {
		t.Run(tc.name+"="+tc.value, func(t *testing.T) {
			configtest.Setenv(t, map[string]string{"CHECKS": "dns", tc.name: tc.value})
			_, agentErr := config.Load(true)
			_, pluginErr := keysFrom(map[string]string{tc.name: tc.value})
			if !tc.refused {
				require.NoError(t, agentErr)
				require.NoError(t, pluginErr)
				return
			}
			require.ErrorContains(t, agentErr, tc.name, "the agent refuses it")
			require.ErrorContains(t, pluginErr, tc.name, "the plugin refuses it too")
			assert.Contains(t, pluginErr.Error(), tc.value)
		})
	}
}
