package chart_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/chart"
	"github.com/nodeready/nodeready/internal/config/configtest"
)

// notValues are the variables the chart takes no value for, and why: what a refusal of
// one of them says, the chart cannot be asked.
var notValues = map[string]string{
	"NODE_NAME":                  "the DaemonSet sets it from the downward API",
	"POD_NAME":                   "the DaemonSet sets it from the downward API",
	"POD_NAMESPACE":              "the DaemonSet sets it from the downward API",
	"KUBERNETES_SERVICE_HOST":    "the kubelet sets it in every pod",
	"KUBERNETES_SERVICE_PORT":    "the kubelet sets it in every pod",
	"STATE_DIR":                  "the DaemonSet sets it to its emptyDir",
	"HTTP_CA_FILE":               "a file in the agent's pod, which helm cannot read: the agent refuses a missing one at start",
	"CLUSTER_DNS_IP":             "kube-node-ready's, which the chart does not take",
	"KLOG_VERBOSITY":             "kube-node-ready's, which the chart does not take",
	"ENABLE_CONNECTIVITY_MATRIX": "kube-node-ready's, which the chart does not take",
}

// TestChartRefusesWhatTheAgentRefuses walks every refusal that the configuration's tests
// assert (internal/config: TestRefusals holds one of each, the other tests add theirs)
// through helm, each variable set as its chart value: the chart must refuse every one it
// can be asked, so that a value the agent would stop on fails `helm install` instead of
// crash-looping every agent.
func TestChartRefusesWhatTheAgentRefuses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "refusals.json")
	cmd := exec.CommandContext(t.Context(), "go", "test", "-vet=off", "-count=1", "./internal/config/")
	cmd.Dir = framework.RepoRoot(t)
	cmd.Env = append(os.Environ(), "NODEREADY_REFUSALS="+path)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the configuration's tests: %s", out)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var cases []configtest.Refusal
	require.NoError(t, json.Unmarshal(data, &cases))
	require.NotEmpty(t, cases)

	asked, skipped := 0, map[string]int{}
	var accepted []string
	for _, c := range cases {
		if _, ok := notValues[c.Var]; ok {
			skipped[c.Var]++
			continue
		}
		var flags []string
		for name, value := range c.Env {
			if _, ok := notValues[name]; ok {
				continue
			}
			arg, ok := chart.SetJSON(name, value)
			require.True(t, ok, "%s: %s has no chart value and no reason in notValues", c.Test, name)
			flags = append(flags, "--set-json", arg)
		}
		asked++
		out, err := template(t, flags...)
		if err != nil {
			continue
		}
		// The chart rendered it: what does the agent say of the ConfigMap it rendered? (A
		// case may leave unset what the chart always sets, such as RETRY_BACKOFF_BASE.)
		cm := decode[corev1.ConfigMap](t, chart.ParseObjects(t, "helm template", []byte(out)), "v1 ConfigMap "+framework.Namespace+"/nodeready-config")
		env := map[string]string{"NODE_NAME": "node-a", "KUBERNETES_SERVICE_HOST": "10.96.0.1"}
		maps.Copy(env, cm.Data)
		if _, err := configtest.Load(t, env, false); err != nil {
			accepted = append(accepted, fmt.Sprintf("%s: the chart accepts %s, the agent refuses what it renders: %v", c.Test, strings.Join(flags, " "), err))
		}
	}
	t.Logf("%d refusals asked of the chart; not asked, as the chart takes no value for them: %v", asked, skipped)
	assert.Empty(t, accepted, "the chart accepts what the agent refuses")
}

// TestChartAcceptsWhatTheAgentAccepts: the refusals above are no wider than the agent's:
// values at the edges of what it accepts render, and the agent starts on what they render.
func TestChartAcceptsWhatTheAgentAccepts(t *testing.T) {
	for _, set := range []map[string]string{
		{"DAEMONSETS_SELECTOR": "tier=node"},
		{"DAEMONSETS_SELECTOR": "app in (cni,csi), !example.com/optional"},
		{"DAEMONSETS_SELECTOR": "tier!=batch,gpu"},
		{"POD_NETWORK_SERVICE": "apps/web", "POD_NETWORK_PORT": "dns-tcp"},
		{"POD_NETWORK_SERVICE": "apps/web", "POD_NETWORK_PORT": "65535"},
		{"POD_NETWORK_SERVICE": "apps/web", "POD_NETWORK_HTTP_PATH": "/healthz?full=1%20x"},
		{"TCP_TARGETS": "db.example:5432,[fd00::1]:443"},
		{"SETTLE_TIME": "15s", "RETRY_BACKOFF_BASE": "1m30s", "RETRY_BACKOFF_MAX": "1.5m"},
		{"CLOCK_MAX_SKEW": "2s"},
		{"CLOCK_MAX_SKEW": "2000ms"},
		{"NETWORKPOLICY_CANARY": "apps/canary"},
		{"EXTRA_TAINTS": "node-ready/unverified:NoExecute,readiness.k8s.io/x:NoSchedule"},
		{"REVERIFY_TAINT": "true", "EXTRA_TAINTS": "readiness.k8s.io/x:PreferNoSchedule"},
		{"NODE_CONDITIONS": "Ready=True,NetworkUnavailable=False"},
		{"DRA_DEVICES": "gpu.nvidia.com>=1,gpu.nvidia.com[productName=A100]>=2,gpu.nvidia.com[memory=80Gi]>=2"},
		{"VERIFIED_LABEL_VALUE": "failed-open-not"},
	} {
		t.Run(fmt.Sprint(set), func(t *testing.T) {
			var flags []string
			for name, value := range set {
				arg, ok := chart.SetJSON(name, value)
				require.True(t, ok, name)
				flags = append(flags, "--set-json", arg)
			}
			out, err := template(t, flags...)
			require.NoError(t, err)
			cm := decode[corev1.ConfigMap](t, chart.ParseObjects(t, "helm template", []byte(out)), "v1 ConfigMap "+framework.Namespace+"/nodeready-config")
			env := map[string]string{"NODE_NAME": "node-a", "KUBERNETES_SERVICE_HOST": "10.96.0.1"}
			maps.Copy(env, cm.Data)
			_, err = configtest.Load(t, env, false)
			assert.NoError(t, err)
		})
	}
}
