package agent

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodeready/nodeready/checks"
)

// names lists "name target" of each check.
func names(list []checks.Check) []string {
	out := make([]string, len(list))
	for i, c := range list {
		out[i] = c.Name() + " " + c.Target()
	}
	return out
}

func TestGateConfigAccepted(t *testing.T) {
	clearEnv(t, map[string]string{
		"NODE_NAME":               "node-a",
		"CHECKS":                  "daemonsets,conditions,resources,csi,command,hold",
		"DAEMONSETS_SELECTOR":     "tier in (cni,csi),!example.com/optional",
		"DAEMONSETS_EXCLUDE":      "kube-system/nodeready, monitoring/node-exporter",
		"NODE_CONDITIONS":         "Ready=True, NetworkUnavailable=False,example.com/GPUHealthy=True",
		"REQUIRED_RESOURCES":      "nvidia.com/gpu>=1,example.com/fpga>=2,hugepages-2Mi>=512Mi",
		"CSI_DRIVERS":             "ebs.csi.aws.com,efs.csi.aws.com",
		"CSI_REQUIRE_ALLOCATABLE": "false",
		"CHECK_COMMAND":           "/etc/nodeready/warmup.sh",
		"CHECK_COMMAND_ARGS":      "--cache,/var/cache/models",
		"MIN_HOLD_TIME":           "30s",
		"MAX_RETRIES":             "6", // 1+2+4+8+16 s of backoff
	})
	cfg, err := LoadConfig(false)
	require.NoError(t, err)
	assert.Equal(t, List{"--cache", "/var/cache/models"}, cfg.CommandArgs)
	assert.Equal(t, 30*time.Second, cfg.MinHoldTime)
	assert.False(t, cfg.CSIRequireAllocatable)
}

func TestGateDefaults(t *testing.T) {
	cfg := defaultConfig(t)
	assert.Equal(t, List{"Ready=True"}, cfg.NodeConditions)
	assert.True(t, cfg.CSIRequireAllocatable)
	assert.Zero(t, cfg.MinHoldTime)
	assert.Empty(t, cfg.DaemonSets)
	for _, gate := range []string{CheckDaemonSets, CheckConditions, CheckResources, CheckCSI, CheckCommand, CheckHold} {
		assert.Contains(t, KnownChecks, gate)
		assert.NotContains(t, cfg.Checks, gate, "gates are opt-in")
	}
}

func TestBuildGateChecks(t *testing.T) {
	started := time.Now().Add(-time.Hour)
	tests := []struct {
		name  string
		env   map[string]string
		want  []string
		types []any
	}{
		{
			name: "one check per target",
			env: map[string]string{
				"CHECKS":             "conditions,resources,csi",
				"NODE_CONDITIONS":    "Ready=True,NetworkUnavailable=False",
				"REQUIRED_RESOURCES": "nvidia.com/gpu>=1",
				"CSI_DRIVERS":        "ebs.csi.aws.com,efs.csi.aws.com",
			},
			want: []string{
				"conditions Ready=True", "conditions NetworkUnavailable=False",
				"resources nvidia.com/gpu>=1",
				"csi ebs.csi.aws.com", "csi efs.csi.aws.com",
			},
			types: []any{&checks.NodeCondition{}, &checks.NodeCondition{}, &checks.Resource{}, &checks.CSIDriver{}, &checks.CSIDriver{}},
		},
		{
			name:  "daemonsets discover, one check",
			env:   map[string]string{"CHECKS": "daemonsets", "DAEMONSETS_SELECTOR": "tier=node"},
			want:  []string{"daemonsets tier=node"},
			types: []any{&checks.DaemonSets{}},
		},
		{
			name:  "daemonsets listed",
			env:   map[string]string{"CHECKS": "daemonsets", "DAEMONSETS": "kube-system/cilium,kube-system/ebs-csi-node"},
			want:  []string{"daemonsets kube-system/cilium,kube-system/ebs-csi-node"},
			types: []any{&checks.DaemonSets{}},
		},
		{
			name:  "command with arguments",
			env:   map[string]string{"CHECKS": "command", "CHECK_COMMAND": "/etc/nodeready/warmup.sh", "CHECK_COMMAND_ARGS": "--fast,--dir=/var/cache"},
			want:  []string{"command /etc/nodeready/warmup.sh --fast --dir=/var/cache"},
			types: []any{&checks.Command{}},
		},
		{
			name:  "hold added by MIN_HOLD_TIME alone, last",
			env:   map[string]string{"CHECKS": "conditions", "MIN_HOLD_TIME": "30s", "INITIAL_TIMEOUT": "5m", "MAX_RETRIES": "10"},
			want:  []string{"conditions Ready=True", "hold 30s"},
			types: []any{&checks.NodeCondition{}, &checks.Hold{}},
		},
		{
			name:  "hold named: where CHECKS puts it, once",
			env:   map[string]string{"CHECKS": "hold,conditions", "MIN_HOLD_TIME": "1m", "MAX_RETRIES": "7"},
			want:  []string{"hold 1m0s", "conditions Ready=True"},
			types: []any{&checks.Hold{}, &checks.NodeCondition{}},
		},
		{
			name:  "no hold by default",
			env:   map[string]string{"CHECKS": "conditions"},
			want:  []string{"conditions Ready=True"},
			types: []any{&checks.NodeCondition{}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"NODE_NAME": "node-a"}
			for k, v := range tt.env {
				env[k] = v
			}
			clearEnv(t, env)
			cfg, err := LoadConfig(false)
			require.NoError(t, err)

			list, err := buildChecks(cfg, fake.NewClientset(), started)

			require.NoError(t, err)
			assert.Equal(t, tt.want, names(list))
			require.Len(t, list, len(tt.types))
			for i := range list {
				assert.IsType(t, tt.types[i], list[i])
			}
		})
	}
}

func TestBuildGateChecksHoldCountsFromStart(t *testing.T) {
	clearEnv(t, map[string]string{"NODE_NAME": "node-a", "CHECKS": "conditions", "MIN_HOLD_TIME": "30s", "RETRY_BACKOFF": "constant", "RETRY_BACKOFF_BASE": "10s", "MAX_RETRIES": "4"})
	cfg, err := LoadConfig(false)
	require.NoError(t, err)

	for _, tt := range []struct {
		started time.Time
		pass    bool
	}{{time.Now().Add(-31 * time.Second), true}, {time.Now(), false}} {
		list, err := buildChecks(cfg, fake.NewClientset(), tt.started)
		require.NoError(t, err)
		hold := list[len(list)-1]
		require.Equal(t, "hold", hold.Name())
		res := checks.Execute(t.Context(), hold, time.Second)
		assert.Equal(t, tt.pass, res.Passed(), "%v", res.Err)
	}
}

// TestBuildGateChecksWithoutCluster is the dry run on a laptop: every API
// gate is a skip that says why, per target; command and hold run.
func TestBuildGateChecksWithoutCluster(t *testing.T) {
	clearEnv(t, map[string]string{
		"CHECKS":             "daemonsets,conditions,resources,csi,command",
		"REQUIRED_RESOURCES": "nvidia.com/gpu>=1",
		"CSI_DRIVERS":        "ebs.csi.aws.com",
		"CHECK_COMMAND":      "/bin/true",
	})
	cfg, err := LoadConfig(true)
	require.NoError(t, err)

	t.Run("no kubeconfig", func(t *testing.T) {
		list, err := buildChecks(cfg, nil, time.Now())
		require.NoError(t, err)
		assert.Equal(t, []string{"daemonsets all", "conditions Ready=True", "resources nvidia.com/gpu>=1", "csi ebs.csi.aws.com", "command /bin/true"}, names(list))
		for _, c := range list[:4] {
			res := checks.Execute(t.Context(), c, time.Second)
			assert.True(t, res.Skipped(), c.Name())
			assert.Contains(t, res.Err.Error(), "no kubeconfig")
		}
	})
	t.Run("no node name", func(t *testing.T) {
		list, err := buildChecks(cfg, fake.NewClientset(), time.Now())
		require.NoError(t, err)
		for _, c := range list[:4] {
			res := checks.Execute(t.Context(), c, time.Second)
			assert.True(t, res.Skipped(), c.Name())
			assert.Contains(t, res.Err.Error(), "NODE_NAME is not set")
		}
	})
}

// TestHoldWithinRetries: a hold must end before the agent would record the
// failing hold as a failed verification.
func TestHoldWithinRetries(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		ok   bool
	}{
		{"defaults allow 15s: 1+2+4+8", map[string]string{"MIN_HOLD_TIME": "15s"}, true},
		{"defaults refuse 16s", map[string]string{"MIN_HOLD_TIME": "16s"}, false},
		{"more retries", map[string]string{"MIN_HOLD_TIME": "61s", "MAX_RETRIES": "7"}, true}, // 1+2+4+8+16+30
		{"the cap holds", map[string]string{"MIN_HOLD_TIME": "62s", "MAX_RETRIES": "7"}, false},
		{"linear", map[string]string{"MIN_HOLD_TIME": "10s", "RETRY_BACKOFF": "linear", "MAX_RETRIES": "5"}, true}, // 1+2+3+4
		{"constant", map[string]string{"MIN_HOLD_TIME": "5s", "RETRY_BACKOFF": "constant", "MAX_RETRIES": "5"}, false},
		{"initial timeout first", map[string]string{"MIN_HOLD_TIME": "2m", "MAX_RETRIES": "100", "INITIAL_TIMEOUT": "1m"}, false},
		{"one round", map[string]string{"MIN_HOLD_TIME": "1s", "MAX_RETRIES": "1"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"NODE_NAME": "node-a", "KUBERNETES_SERVICE_HOST": "10.96.0.1"}
			for k, v := range tt.env {
				env[k] = v
			}
			clearEnv(t, env)
			_, err := LoadConfig(false)
			if tt.ok {
				assert.NoError(t, err)
				return
			}
			var ce *ConfigError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, "MIN_HOLD_TIME", ce.Var)
			assert.Contains(t, ce.Accepted, "raise MAX_RETRIES")
		})
	}
}
