package failure

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// testWebhookDown: a validating webhook on Node UPDATE with failurePolicy Fail whose server is
// down (its URL is a closed port on loopback) makes the real API server answer every release
// 500 "failed calling webhook". The agent reports it on the node (condition Misconfigured with
// the server's message) and in a ReleaseFailed Event instead of waiting in silence, and
// releases the node once the webhook is gone.
func testWebhookDown(t *testing.T, fw *framework.Framework) {
	ctx, client := t.Context(), fw.Client()
	f := fw.NewFleet("webhook")
	webhook := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "nodeready-e2e-down"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "nodes.down.example.com",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/validate")},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"nodes"}}}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](2),
			// Only this fleet's nodes: the other tests' nodes keep working.
			ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{framework.FleetLabel: f.Name()}},
		}},
	}
	_, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, webhook, metav1.CreateOptions{})
	require.NoError(t, err)
	removed := false
	remove := func() {
		if removed {
			return
		}
		removed = true
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, webhook.Name, metav1.DeleteOptions{}))
	}
	t.Cleanup(remove)

	// The webhook refuses every update of the node, the node lifecycle controller's too, so
	// the not-ready taint it puts on a new node stays. The shipped DaemonSet does not tolerate
	// it (its pod comes once the node is Ready: docs/install.md, Tolerations), so such a node
	// is held without an agent, which kubectl nodeready status and NodeReadyHeldWithoutAgent
	// tell. To reach the agent's refused release, the test lists that taint.
	fw.TolerateKey("node.kubernetes.io/not-ready")
	node := f.Name() + "-0"
	require.NoError(t, f.AddNode(ctx, node, framework.NodeOptions{Env: map[string]string{"MAX_RETRIES": "2"}}))
	cond := fw.WaitCondition(node, string(wellknown.Misconfigured))
	assert.Contains(t, cond.Message, "failed calling webhook")
	assert.Contains(t, cond.Message, "nodes.down.example.com")
	ev := fw.WaitEvent(node, "ReleaseFailed")
	assert.Contains(t, ev.Note, "failed calling webhook")
	require.True(t, framework.IsTainted(fw.Node(node)), "held while the release fails")

	// Another webhook fails now: another error, which client-go's recorder, writing to the
	// real API server, stores as an Event of its own instead of folding it into the first.
	current, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, webhook.Name, metav1.GetOptions{})
	require.NoError(t, err)
	current.Webhooks[0].Name = "nodes.other.example.com"
	_, err = client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, current, metav1.UpdateOptions{})
	require.NoError(t, err)
	var notes []string
	err = framework.Poll(t, func(ctx context.Context) (bool, error) {
		evs, err := fw.Cluster().NodeEvents(ctx, node, "ReleaseFailed")
		if err != nil {
			return false, nil
		}
		notes = notes[:0]
		for _, e := range evs {
			notes = append(notes, e.Note)
		}
		return len(evs) == 2, nil
	})
	require.NoError(t, err, "want a ReleaseFailed Event per distinct error; have %q", notes)
	assert.True(t, slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, "nodes.down.example.com") }), "%q", notes)
	assert.True(t, slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, "nodes.other.example.com") }), "%q", notes)
	cond = fw.WaitCondition(node, string(wellknown.Misconfigured))
	assert.Contains(t, cond.Message, "nodes.other.example.com", "the condition follows the latest round")

	// The way out of the deadlock (README: Runbook): the webhook goes, the node is released.
	remove()
	require.NoError(t, f.WaitReleased(ctx, node))
	fw.WaitCondition(node, string(wellknown.Verified))
}
