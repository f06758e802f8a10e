package agent

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/nodeready/nodeready/internal/config"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// forbidden is RBAC's or an admission policy's answer to a write of the node.
var forbidden = apierrors.NewForbidden(corev1.Resource("nodes"), nodeName, errors.New("denied by policy"))

// TestRunKeepsTryingWhenReleaseIsForbidden: a release RBAC refuses is tried again each
// round, and goes through once RBAC is fixed, without anyone restarting the pod.
func TestRunKeepsTryingWhenReleaseIsForbidden(t *testing.T) {
	c := newCluster(heldNode())
	refused := c.fault("patch", "", forbidden)
	r := runNew(t, c, passing, map[string]string{"RETRY_BACKOFF_BASE": "20ms", "RETRY_BACKOFF_MAX": "20ms"})

	waitFor(t, "retried", func() bool { return c.requests("patch", "") >= 3 })
	assert.False(t, isVerified(r.Agent))
	assert.Positive(t, patchesOf(r.Agent, "error"))
	assert.Contains(t, c.node(t).Spec.Taints, startupTaint)

	refused.Store(false) // RBAC fixed
	waitFor(t, "released once allowed", func() bool { return isVerified(r.Agent) })
	assert.Equal(t, []corev1.Taint{otherTaint}, c.node(t).Spec.Taints)
}

// TestRefusedReleaseIsAMisconfiguration: checks pass but the release is refused (the label
// changed in the ConfigMap but not in the admission policy, say). That is reported as a
// misconfiguration, once per error, and never brings on the failure action, on a held node
// either.
func TestRefusedReleaseIsAMisconfiguration(t *testing.T) {
	for _, action := range []string{config.FailOpen, config.ReplaceNode} {
		t.Run(action, func(t *testing.T) {
			c := newCluster(heldNode())
			refused := c.fault("patch", "", forbidden)
			r := runNew(t, c, passing, map[string]string{"MAX_RETRIES": "1", "FAILURE_ACTION": action, "FAIL_OPEN_AFTER": "1ms"})

			waitFor(t, "failure recorded", func() bool { return failures(r.Agent) == 1 })
			waitFor(t, "release tried again", func() bool { return c.requests("patch", "") >= 5 })
			assert.Zero(t, c.requests("delete", ""), "a refused release replaced the node")
			assert.False(t, isVerified(r.Agent), "a refused release failed open")
			// The condition goes with the label, so each release's Verified is followed at once
			// by why it was refused; between the two, a release is in flight.
			assertTakenBack(t, takenBack(t, c, wellknown.Misconfigured), wellknown.Misconfigured)
			assert.Contains(t, c.waitEvent(t, wellknown.ReleaseFailed).Note, "a misconfiguration, not a failed check")
			// Held, failing only for the installation: the failure action waits.
			assert.Contains(t, c.waitEvent(t, wellknown.VerificationFailed).Note, "failure action: none while the installation is misconfigured")

			refused.Store(false) // the policy fixed
			waitFor(t, "released once allowed", func() bool { return isVerified(r.Agent) })
			require.NoError(t, r.stop(t))
			c.emittedOnce(t, wellknown.ReleaseFailed)
			assert.Empty(t, c.eventsOf(t, wellknown.CheckFailed), "no check failed")
			assert.Equal(t, "true", c.node(t).Labels["node-ready/verified"], "released as verified, not failed open")
		})
	}
}

// TestReleaseFailingOnAWebhook: a webhook on Node UPDATE that is down makes the API server
// answer every release 500 "failed calling webhook"; the node read afterwards shows the write
// did not land. That is a definite failure with the server's message, on the node and in an
// Event, not an unknown outcome waited for in silence; once the webhook is back, the node is
// released.
func TestReleaseFailingOnAWebhook(t *testing.T) {
	c := newCluster(heldNode())
	down := c.fault("patch", "", apierrors.NewInternalError(errors.New(`failed calling webhook "nodes.example.com": failed to call webhook: connection refused`)))
	r := runNew(t, c, passing, map[string]string{"MAX_RETRIES": "2"})

	waitFor(t, "the failure recorded", func() bool { return c.condition(t).Reason == string(wellknown.Misconfigured) })
	assert.Contains(t, c.condition(t).Message, "failed calling webhook")
	assert.Contains(t, c.waitEvent(t, wellknown.ReleaseFailed).Note, "failed calling webhook")

	down.Store(false)
	waitFor(t, "released", func() bool { return isVerified(r.Agent) })
	assert.Equal(t, string(wellknown.Verified), c.condition(t).Reason)
	require.NoError(t, r.stop(t))
	c.emittedOnce(t, wellknown.ReleaseFailed)
}

// TestMomentaryAPIErrorsAreNotMisconfigurations: a 429 after client-go's retries or a 503
// while the API server is away says nothing about the installation: rounds go on, no
// condition, no Event, no failure; the node is released when the server answers.
func TestMomentaryAPIErrorsAreNotMisconfigurations(t *testing.T) {
	for name, err := range map[string]error{
		"429": apierrors.NewTooManyRequests("the server has received too many requests", 1),
		"503": apierrors.NewServiceUnavailable("the server is currently unable to handle the request"),
	} {
		t.Run(name, func(t *testing.T) {
			c := newCluster(heldNode())
			away := c.unreachable(err)
			r := runNew(t, c, passing, map[string]string{"MAX_RETRIES": "1"})

			waitFor(t, "rounds past MAX_RETRIES", func() bool { return patchesOf(r.Agent, "error") >= 3 })
			assert.Zero(t, c.requests("patch", "status"), "a condition: nothing failed")
			assert.Zero(t, failures(r.Agent))
			away.Store(false)
			waitFor(t, "released", func() bool { return isVerified(r.Agent) })
			require.NoError(t, r.stop(t))
			assert.Equal(t, []string{"Verified"}, c.eventReasons(t), "an Event besides the release's")
			assert.Equal(t, []string{string(wellknown.Verified)}, c.reasons())
		})
	}
}

// TestSIGTERMDuringReleaseIsCarriedThrough: the label makes the DaemonSet controller delete
// the pod at once, often while the release is still being written. Checks passed, so the
// release is finished and reported, condition and Event, not taken for an abort.
func TestSIGTERMDuringReleaseIsCarriedThrough(t *testing.T) {
	c := newCluster(heldNode())
	r := prepare(t, newAgent(t, Clients{Kube: c.kube()}, passing))
	c.onRelease(r.sigterm)
	require.NoError(t, r.start().wait(t))

	assert.True(t, isVerified(r.Agent), "the release went through and is reported")
	assert.Equal(t, 1, c.requests("patch", ""))
	assert.Equal(t, []corev1.Taint{otherTaint}, c.node(t).Spec.Taints)
	assert.Equal(t, []string{string(wellknown.Verified)}, c.reasons(), "the condition is written after the SIGTERM")
	// Run returns once its Events are written.
	assert.Equal(t, []string{"Verified"}, c.eventReasons(t))
}

// TestSettleFailureAfterReleaseIsNoAbort: once the write has landed, a settle window cut
// short (here the node was deleted during it) is a warning; the node is reported verified,
// with no second round.
func TestSettleFailureAfterReleaseIsNoAbort(t *testing.T) {
	c := newCluster(heldNode())
	r := runNew(t, c, passing, map[string]string{"SETTLE_TIME": config.MaxSettleTime.String()})

	waitFor(t, "released", func() bool { return c.node(t).Labels["node-ready/verified"] == "true" })
	c.deleteNode(t)
	// Verified only once the settle window ends, which only the deletion brings this soon.
	waitFor(t, "verified", func() bool { return isVerified(r.Agent) })
	assert.Equal(t, 1.0, rounds(r.Agent), "a second round")
	assert.Equal(t, 1, c.requests("patch", ""))
	assert.True(t, strings.HasPrefix(c.waitEvent(t, wellknown.Verified).Note, "All 1 checks passed; released in "))
}

// TestLabelNeverBeforeItsCondition: after refused releases, whose condition says
// Misconfigured, the release that lands writes its condition first: no version of the node
// carries the verified label with a condition that says otherwise.
func TestLabelNeverBeforeItsCondition(t *testing.T) {
	c := newCluster(heldNode())
	refused := c.fault("patch", "", forbidden)
	r := runNew(t, c, passing, map[string]string{"MAX_RETRIES": "1"})

	waitFor(t, "refused twice", func() bool { return patchesOf(r.Agent, "error") >= 2 })
	waitFor(t, "the refusal on the node", func() bool { return c.condition(t).Reason == string(wellknown.Misconfigured) })
	refused.Store(false) // the policy fixed
	waitFor(t, "released", func() bool { return isVerified(r.Agent) })
	require.NoError(t, r.stop(t))
	assert.Empty(t, c.disagreed, "versions of the node labelled with a condition that says otherwise")
	assert.Equal(t, string(wellknown.Verified), c.condition(t).Reason)
}

// TestMomentaryReleaseFailureTakesItsConditionBack: the release's condition lands, its label
// does not (429 after client-go's retries, 503 while the API server is away). The node, held,
// says Verified no longer than the release's attempt: the condition is taken back at once
// (Verifying), not left True until the retries run out; no Event, no failure.
func TestMomentaryReleaseFailureTakesItsConditionBack(t *testing.T) {
	for name, err := range map[string]error{
		"429": apierrors.NewTooManyRequests("the server has received too many requests", 1),
		"503": apierrors.NewServiceUnavailable("the server is currently unable to handle the request"),
	} {
		t.Run(name, func(t *testing.T) {
			c := newCluster(heldNode())
			c.fault("patch", "", err) // the label's write; the condition's lands
			r := runNew(t, c, passing, map[string]string{"MAX_RETRIES": "100"})

			waitFor(t, "release tried twice", func() bool { return patchesOf(r.Agent, "error") >= 2 })
			require.NoError(t, r.stop(t))
			assert.NotContains(t, c.node(t).Labels, "node-ready/verified")
			assert.Equal(t, corev1.ConditionFalse, c.condition(t).Status, "a held node says Verified")
			assert.Equal(t, string(wellknown.Verifying), c.condition(t).Reason)
			assertTakenBack(t, c.reasons(), wellknown.Verifying)
			assert.Zero(t, failures(r.Agent))
			assert.Empty(t, c.events(t))
		})
	}
}
