package agent

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodeready/nodeready/checks"
	"github.com/nodeready/nodeready/internal/kube/adapt"
)

// names lists "name target" of each check.
func names(list []checks.Check) []string {
	out := make([]string, len(list))
	for i, c := range list {
		out[i] = c.Name() + " " + c.Target()
	}
	return out
}

func TestBuildGateChecks(t *testing.T) {
	tests := []struct {
		name  string
		env   map[string]string
		want  []string
		types []any
	}{
		{
			name: "one check per target",
			env: map[string]string{
				"CHECKS":             "conditions,resources,csi,dra",
				"NODE_CONDITIONS":    "Ready=True,NetworkUnavailable=False",
				"REQUIRED_RESOURCES": "nvidia.com/gpu>=1",
				"CSI_DRIVERS":        "ebs.csi.aws.com,efs.csi.aws.com",
				"DRA_DEVICES":        "gpu.nvidia.com>=8,rdma.example.com>=1",
			},
			want: []string{
				"conditions Ready=True", "conditions NetworkUnavailable=False",
				"resources nvidia.com/gpu>=1",
				"csi ebs.csi.aws.com", "csi efs.csi.aws.com",
				"dra gpu.nvidia.com>=8", "dra rdma.example.com>=1",
			},
			types: []any{&checks.NodeCondition{}, &checks.NodeCondition{}, &checks.Resource{}, &checks.CSIDriver{}, &checks.CSIDriver{},
				&checks.DRADevices{}, &checks.DRADevices{}},
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
			name:  "MIN_HOLD_TIME adds no check",
			env:   map[string]string{"CHECKS": "conditions", "MIN_HOLD_TIME": "1m"},
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
			cfg := loadConfig(t, env, false)

			list := buildChecks(cfg, adapt.Clientset(fake.NewClientset()), checks.APIServerEndpoint{})

			assert.Equal(t, tt.want, names(list))
			require.Len(t, list, len(tt.types))
			for i := range list {
				assert.IsType(t, tt.types[i], list[i])
			}
		})
	}
}

// TestBuildGateChecksWithoutCluster is the dry run on a laptop: every API
// gate is a skip that says why, per target; command runs.
func TestBuildGateChecksWithoutCluster(t *testing.T) {
	cfg := loadConfig(t, map[string]string{
		"CHECKS":             "daemonsets,conditions,resources,csi,dra,command",
		"REQUIRED_RESOURCES": "nvidia.com/gpu>=1",
		"CSI_DRIVERS":        "ebs.csi.aws.com",
		"DRA_DEVICES":        "gpu.nvidia.com>=8",
		"CHECK_COMMAND":      "/bin/true",
	}, true)

	t.Run("no kubeconfig", func(t *testing.T) {
		list := buildChecks(cfg, nil, checks.APIServerEndpoint{})
		assert.Equal(t, []string{"daemonsets all", "conditions Ready=True", "resources nvidia.com/gpu>=1", "csi ebs.csi.aws.com", "dra gpu.nvidia.com>=8", "command /bin/true"}, names(list))
		for _, c := range list[:5] {
			res := checks.Execute(t.Context(), c, time.Second)
			assert.True(t, res.Skipped(), c.Name())
			assert.Contains(t, res.Err.Error(), "no kubeconfig")
		}
	})
	t.Run("no node name", func(t *testing.T) {
		list := buildChecks(cfg, adapt.Clientset(fake.NewClientset()), checks.APIServerEndpoint{})
		for _, c := range list[:5] {
			res := checks.Execute(t.Context(), c, time.Second)
			assert.True(t, res.Skipped(), c.Name())
			assert.Contains(t, res.Err.Error(), "NODE_NAME is not set")
		}
	})
}
