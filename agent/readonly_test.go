package agent

import (
	"bytes"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodeready/nodeready/internal/kube/adapt"
)

// TestDryRunVariableIsReadOnly: DRY_RUN=true, the environment source of
// kube-node-ready's --dry-run flag, kept kube-node-ready from writing to the
// cluster. nodeready runs its rounds of checks as usual and logs what it
// would do, but never labels or untaints the node, sets no condition, emits
// no Event and deletes nothing: every request it sends is a read.
func TestDryRunVariableIsReadOnly(t *testing.T) {
	startupTaint := corev1.Taint{Key: "node-ready/unverified", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name        string
		env         map[string]string
		taints      []corev1.Taint
		annotations map[string]string
		until       func(a *Agent) bool
		logs        string
	}{
		{
			name:   "checks pass",
			env:    map[string]string{"CHECKS": "apiserver", "APISERVER_PROBE": "node"},
			taints: []corev1.Taint{startupTaint},
			until:  func(a *Agent) bool { return a.verified.Load() },
			logs:   "Would release node",
		},
		{
			name: "checks fail and the node would be deleted",
			env: map[string]string{"CHECKS": "conditions", "NODE_CONDITIONS": "Ready=True", "MAX_RETRIES": "1",
				"DELETE_FAILED_NODE": "true"},
			taints: []corev1.Taint{startupTaint},
			until:  func(a *Agent) bool { return testutil.ToFloat64(a.metrics.rounds) >= 3 },
			logs:   "Would delete",
		},
		{
			name:        "re-verification would put the taint back",
			env:         map[string]string{"CHECKS": "conditions", "NODE_CONDITIONS": "Ready=True", "REVERIFY_TAINT": "true"},
			annotations: map[string]string{"node-ready/verified-at": "2025-01-01T00:00:00Z"}, // verified before
			until:       func(a *Agent) bool { return testutil.ToFloat64(a.metrics.rounds) >= 2 },
			logs:        "Would put the startup taint back",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"NODE_NAME": "node-a", "DRY_RUN": "true", "SETTLE_TIME": "0s",
				"RETRY_BACKOFF_BASE": "1ms", "RETRY_BACKOFF_MAX": "5ms"}
			for k, v := range tt.env {
				env[k] = v
			}
			cfg := loadConfig(t, env, false)
			cfg.MetricsPort = 0 // any free port

			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{"pool": "a"}, Annotations: tt.annotations},
				Spec: corev1.NodeSpec{Taints: tt.taints}}
			client := fake.NewClientset(node.DeepCopy())
			var logs bytes.Buffer
			a, err := New(cfg, zerolog.New(&logs), Clients{Kube: adapt.Clientset(client)}, BuildInfo{Version: "test"}, time.Now())
			require.NoError(t, err)
			// A node of the configuration passed: the failure action has the fleet's evidence.
			require.NoError(t, client.Tracker().Add(fleetNode("node-passed", a.fleet.fingerprint, time.Now(), "")))
			a.fleet.every = 0
			r := start(t, a)
			waitFor(t, "rounds of checks", func() bool { return tt.until(a) })
			require.NoError(t, r.stop(t))

			for _, action := range client.Actions() {
				assert.Contains(t, []string{"get", "list", "watch"}, action.GetVerb(),
					"DRY_RUN=true sent a write: %s %s", action.GetVerb(), action.GetResource().Resource)
			}
			stored, err := client.CoreV1().Nodes().Get(t.Context(), "node-a", metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, node.Labels, stored.Labels)
			assert.Equal(t, node.Annotations, stored.Annotations)
			assert.Equal(t, node.Spec.Taints, stored.Spec.Taints)
			assert.Empty(t, stored.Status.Conditions)
			assert.Contains(t, logs.String(), tt.logs)
		})
	}
}
