package config_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/nodeready/nodeready/checks"
)

func TestGateConfigAccepted(t *testing.T) {
	cfg, err := load(t, map[string]string{
		"NODE_NAME":               "node-a",
		"CHECKS":                  "daemonsets,conditions,resources,csi,dra,command",
		"DRA_DEVICES":             "gpu.nvidia.com>=8, gpu.nvidia.com[productName=NVIDIA A100-SXM4-80GB]>=4",
		"DAEMONSETS_SELECTOR":     "tier in (cni,csi),!example.com/optional",
		"DAEMONSETS_EXCLUDE":      "kube-system/nodeready, monitoring/node-exporter",
		"NODE_CONDITIONS":         "Ready=True, NetworkUnavailable=False,example.com/GPUHealthy=True",
		"REQUIRED_RESOURCES":      "nvidia.com/gpu>=1,example.com/fpga>=2,hugepages-2Mi>=512Mi",
		"CSI_DRIVERS":             "ebs.csi.aws.com,efs.csi.aws.com",
		"CSI_REQUIRE_ALLOCATABLE": "false",
		"CHECK_COMMAND":           "/etc/nodeready/warmup.sh",
		"CHECK_COMMAND_ARGS":      "--cache,/var/cache/models",
		"MIN_HOLD_TIME":           "30m", // waiting, not failing: no limit from the retries
	}, false)
	require.NoError(t, err)
	assert.Equal(t, []string{"--cache", "/var/cache/models"}, []string(cfg.Options.Command.Args))
	assert.Equal(t, 30*time.Minute, cfg.MinHoldTime)
	assert.False(t, cfg.Options.CSI.RequireAllocatable)

	// Parsed once, here, into the values the checks take.
	assert.Equal(t, []checks.ConditionWant{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
		{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse},
		{Type: "example.com/GPUHealthy", Status: corev1.ConditionTrue},
	}, cfg.Options.Conditions.Want)
	assert.Equal(t, []string{"nvidia.com/gpu>=1", "example.com/fpga>=2", "hugepages-2Mi>=512Mi"}, strs(cfg.Options.Resources.Min))
	assert.Equal(t, []string{"gpu.nvidia.com>=8", "gpu.nvidia.com[gpu.nvidia.com/productName=NVIDIA A100-SXM4-80GB]>=4"}, strs(cfg.Options.DRA.Min), "attributes in their qualified form")
	assert.True(t, cfg.Options.DaemonSets.Selection.Matches(labels.Set{"tier": "cni"}))
	assert.False(t, cfg.Options.DaemonSets.Selection.Matches(labels.Set{"tier": "cni", "example.com/optional": "true"}))
	assert.Equal(t, []string{"kube-system/nodeready", "monitoring/node-exporter"}, []string(cfg.Options.DaemonSets.Exclude))
}

func TestGateDefaults(t *testing.T) {
	cfg := defaultConfig(t)
	assert.Equal(t, []checks.ConditionWant{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}, cfg.Options.Conditions.Want)
	assert.True(t, cfg.Options.CSI.RequireAllocatable)
	assert.Zero(t, cfg.MinHoldTime)
	assert.Empty(t, cfg.Options.DaemonSets.Names)
	for _, gate := range []checks.Name{checks.NameDaemonSets, checks.NameConditions, checks.NameResources, checks.NameCSI, checks.NameDRA, checks.NameCommand} {
		assert.Contains(t, checks.Names(), gate)
		assert.NotContains(t, cfg.Checks, gate, "gates are opt-in")
	}
}

// strs writes each value as its String method does.
func strs[T fmt.Stringer](values []T) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = v.String()
	}
	return out
}
