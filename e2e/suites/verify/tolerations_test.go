package verify

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// TestForeignTaintGetsNoAgent: the DaemonSet as manifests/ installs it lists its tolerations,
// so a node with a NoSchedule taint it does not name (a dedicated pool's) gets no agent pod
// from the real DaemonSet controller and stays held, while a node of the same fleet without
// it is released. The held node is not silent: `kubectl nodeready status` says no agent runs
// there, with the taint, in its row, its JSON (noAgent) and its summary. Once the DaemonSet
// tolerates the pool's taint, as install.md tells, the agent comes and releases the node.
func TestForeignTaintGetsNoAgent(t *testing.T) {
	fw := framework.New(t, framework.Options{})
	ctx := t.Context()
	admin := fw.Client()
	gpu := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}

	f := fw.NewFleet("pool")
	held, plain := f.Name()+"-gpu", f.Name()+"-plain"
	require.NoError(t, f.AddNode(ctx, held, framework.NodeOptions{Taints: []corev1.Taint{gpu}}))
	require.NoError(t, f.AddNode(ctx, plain, framework.NodeOptions{}))
	require.NoError(t, f.WaitReleased(ctx, plain), "a node of the same fleet without the pool's taint")

	// The held node is Ready and its not-ready taint gone (so the DaemonSet controller has
	// looked at it): still no agent pod, and the startup taint stays.
	require.NoError(t, fw.Poll(func(ctx context.Context) (bool, error) {
		n, err := admin.CoreV1().Nodes().Get(ctx, held, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, taint := range n.Spec.Taints {
			if taint.Key == corev1.TaintNodeNotReady {
				return false, nil
			}
		}
		return true, nil
	}))
	assert.Never(t, func() bool {
		pods, err := fw.PodsOn(ctx, held)
		return err != nil || len(pods) > 0
	}, 5*time.Second, 250*time.Millisecond, "an agent pod on a node with a taint the DaemonSet does not tolerate")
	assert.Contains(t, fw.Node(held).Spec.Taints, wellknown.StartupTaint(), "the node stays held")

	kubectl := fw.Plugin("alice@example.com", "system:masters")
	out := kubectl.MustRun("status", "-l", framework.FleetLabel+"="+f.Name())
	var row string
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, held+" ") {
			row = line
		}
	}
	assert.Contains(t, row, "held", "kubectl nodeready status:\n%s", out)
	assert.Contains(t, row, "no agent pod here; other taints: dedicated=gpu:NoSchedule", "kubectl nodeready status:\n%s", out)
	assert.Contains(t, out, "held without an agent: "+held+"\n", "the summary line")

	var status struct {
		Nodes []struct {
			Name    string `json:"name"`
			State   string `json:"state"`
			NoAgent bool   `json:"noAgent"`
		} `json:"nodes"`
		Summary struct {
			HeldWithoutAgent []string `json:"heldWithoutAgent"`
		} `json:"summary"`
	}
	require.NoError(t, json.Unmarshal([]byte(kubectl.MustRun("status", "-o", "json", "-l", framework.FleetLabel+"="+f.Name())), &status))
	noAgent := map[string]bool{}
	for _, n := range status.Nodes {
		noAgent[n.Name] = n.NoAgent
	}
	assert.Equal(t, map[string]bool{held: true, plain: false}, noAgent)
	assert.Equal(t, []string{held}, status.Summary.HeldWithoutAgent)

	// The pool's taint listed in the DaemonSet's tolerations: its agent comes and releases it.
	fw.Tolerate(corev1.Toleration{Key: gpu.Key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	require.NoError(t, f.WaitReleased(ctx, held), "released once its taint is tolerated")
	assert.Contains(t, fw.Node(held).Spec.Taints, gpu, "the pool's taint stays")
}
