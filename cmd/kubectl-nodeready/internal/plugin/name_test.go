package plugin

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNameFindsRenamedInstall: --name finds an install whose objects the chart's
// nameOverride renamed: the keys from its ConfigMap NAME-config, its agent pods by
// app.kubernetes.io/name=NAME; --config-map and --agent-selector still win over it, and a name
// that is no DNS label is refused by the flag's name.
func TestNameFindsRenamedInstall(t *testing.T) {
	const name = "edge"
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "-config", Namespace: DefaultNamespace},
		Data: map[string]string{"TAINT_KEY": "example.com/unverified"}}
	held := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "held", CreationTimestamp: ago(time.Hour)},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "example.com/unverified", Value: "true", Effect: corev1.TaintEffectNoSchedule}}}}
	pod := agent(name+"-x7k2p", "held", corev1.PodRunning, 0)
	pod.Labels["app.kubernetes.io/name"] = name
	status := func(args ...string) (FleetStatus, result) {
		t.Helper()
		r := run(t, newClient(cm, held, pod), append([]string{"-o", "json"}, args...)...)
		require.NoError(t, r.err)
		var s FleetStatus
		require.NoError(t, json.Unmarshal([]byte(r.out), &s))
		return s, r
	}

	s, r := status("--name", name)
	assert.Empty(t, r.errOut)
	assert.Equal(t, "ConfigMap kube-system/edge-config", s.Keys.Source)
	require.Len(t, s.Nodes, 1)
	assert.Equal(t, Held, s.Nodes[0].State, "judged by the renamed install's taint")
	require.Len(t, s.Nodes[0].Agents, 1)
	assert.Equal(t, name+"-x7k2p", s.Nodes[0].Agents[0].Name)

	// Without --name, nodeready's names: no ConfigMap, no agent, the node not nodeready's.
	s, r = status()
	assert.Contains(t, r.errOut, "could not read kube-system/nodeready-config (not found)")
	assert.Contains(t, r.errOut, "--name")
	assert.Equal(t, NotManaged, s.Nodes[0].State)

	// The flags it stands for win over it.
	s, _ = status("--name", name, "--agent-selector", "app.kubernetes.io/name=other")
	assert.Equal(t, "ConfigMap kube-system/edge-config", s.Keys.Source)
	assert.Empty(t, s.Nodes[0].Agents)
	s, r = status("--name", name, "--config-map", "other")
	assert.Contains(t, r.errOut, "could not read kube-system/other (not found)")
	assert.Len(t, s.Nodes[0].Agents, 1)

	r = run(t, newClient(), "--name", "Edge_1")
	assert.ErrorContains(t, r.err, `--name "Edge_1": a lowercase RFC 1123 label`)
}
