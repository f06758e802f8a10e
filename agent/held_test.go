package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"

	"github.com/nodeready/nodeready/checks"
	"github.com/nodeready/nodeready/config"
	"github.com/nodeready/nodeready/nodepatch"
)

// eventsWith returns the recorded Events that start with prefix ("Warning
// ReleaseFailed").
func eventsWith(r *events.FakeRecorder, prefix string) []string {
	var out []string
	for _, e := range drain(r) {
		if strings.HasPrefix(e, prefix) {
			out = append(out, e)
		}
	}
	return out
}

// TestFailureActionsOnlyOnHeldNodes: a node that had no startup taint when
// the agent started (a node that predates the install) is never failed open
// nor replaced, however its checks fail; the failure is still recorded and
// says why no action follows.
func TestFailureActionsOnlyOnHeldNodes(t *testing.T) {
	for _, action := range []string{config.FailOpen, config.ReplaceNode} {
		t.Run(action, func(t *testing.T) {
			node := &fakeNode{notHeld: true}
			broken := &fakeCheck{name: "dns"}
			broken.fail.Store(true)
			a := testAgent(t, node, broken)
			a.cfg.MaxRetries = 1
			a.cfg.FailureAction = action
			a.cfg.FailOpenAfter = time.Millisecond
			_, _ = runAgent(t, a)

			waitFor(t, "failure recorded", func() bool { return testutil.ToFloat64(a.metrics.failures) == 1 })
			waitFor(t, "rounds go on", func() bool { return broken.runs.Load() >= 5 })
			assert.False(t, a.held)
			assert.Zero(t, node.count(), "never released")
			assert.Zero(t, node.replaced(), "never replaced")
			assert.Equal(t, []string{nodepatch.ReasonChecksFailed}, node.reasons())
			failed := eventsWith(recorder(a), "Warning VerificationFailed")
			require.Len(t, failed, 1)
			assert.Contains(t, failed[0], "failure action: none, the node is not held by nodeready")

			broken.fail.Store(false)
			waitFor(t, "labelled once its checks pass", a.verified.Load)
		})
	}
}

// TestRefusedReleaseIsAMisconfiguration: checks pass but the release is
// refused (the label changed in the ConfigMap but not in the admission
// policy, say). That is reported as a misconfiguration, once per error, and
// never brings on the failure action, on a held node either.
func TestRefusedReleaseIsAMisconfiguration(t *testing.T) {
	for _, action := range []string{config.FailOpen, config.ReplaceNode} {
		t.Run(action, func(t *testing.T) {
			node := &fakeNode{}
			node.set(fmt.Errorf("patch node node-a: %w: check the ClusterRole and the admission policy", nodepatch.ErrForbidden))
			a := testAgent(t, node, &fakeCheck{name: "dns"})
			a.cfg.MaxRetries = 1
			a.cfg.FailureAction = action
			a.cfg.FailOpenAfter = time.Millisecond
			_, _ = runAgent(t, a)

			waitFor(t, "failure recorded", func() bool { return testutil.ToFloat64(a.metrics.failures) == 1 })
			waitFor(t, "release tried again", func() bool { return node.count() >= 5 })
			assert.True(t, a.held)
			assert.Zero(t, node.replaced(), "a refused release never replaces the node")
			assert.False(t, a.verified.Load(), "nor fails it open")
			assert.Equal(t, []string{nodepatch.ReasonMisconfigured}, node.reasons())
			rec := recorder(a)
			all := drain(rec)
			var refused, failed, checkFailed int
			for _, e := range all {
				switch {
				case strings.HasPrefix(e, "Warning ReleaseFailed"):
					refused++
					assert.Contains(t, e, "a misconfiguration, not a failed check")
				case strings.HasPrefix(e, "Warning VerificationFailed"):
					failed++
					assert.Contains(t, e, "failure action: none while the installation is misconfigured")
				case strings.HasPrefix(e, "Warning CheckFailed"):
					checkFailed++
				}
			}
			assert.Equal(t, 1, refused, "one ReleaseFailed Event for a repeating error: %v", all)
			assert.Equal(t, 1, failed)
			assert.Zero(t, checkFailed, "no check failed")

			node.set(nil) // the policy fixed
			waitFor(t, "released once allowed", a.verified.Load)
		})
	}
}

// forbiddenCheck fails as a check does whose API read RBAC refuses.
type forbiddenCheck struct{ fakeCheck }

func (c *forbiddenCheck) Run(context.Context) error {
	c.runs.Add(1)
	return fmt.Errorf("list EndpointSlices of default/kubernetes: %w",
		apierrors.NewForbidden(schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}, "", fmt.Errorf("RBAC")))
}

// TestForbiddenCheckIsAMisconfiguration: a check the API refuses (the
// endpoints Role in the wrong namespace) cannot say anything about the node:
// it holds the node but never replaces it.
func TestForbiddenCheckIsAMisconfiguration(t *testing.T) {
	node := &fakeNode{}
	refused := &forbiddenCheck{fakeCheck{name: "endpoints"}}
	broken := &fakeCheck{name: "dns"}
	broken.fail.Store(true)
	a := testAgent(t, node, refused, broken)
	a.cfg.MaxRetries = 1
	a.cfg.FailureAction = config.ReplaceNode
	_, _ = runAgent(t, a)

	waitFor(t, "failure recorded", func() bool { return testutil.ToFloat64(a.metrics.failures) == 1 })
	waitFor(t, "rounds go on", func() bool { return refused.runs.Load() >= 5 })
	assert.Zero(t, node.replaced(), "not while the installation is misconfigured")
	assert.Zero(t, node.count())
	// One per failing check and round (the real recorder counts the repeats into one Event's
	// series); the refused check is a misconfiguration, never a CheckFailed.
	checkFailed := eventsWith(recorder(a), "Warning CheckFailed")
	require.NotEmpty(t, checkFailed)
	for _, e := range checkFailed {
		assert.Contains(t, e, "dns target-dns")
	}
}

// notCheckable is a dns check excused because no cluster DNS runs.
type notCheckable struct{ fakeCheck }

func (c *notCheckable) Run(context.Context) error {
	c.runs.Add(1)
	return fmt.Errorf("%w (kube-system/kube-dns has no ready endpoint): connection refused", checks.ErrNoClusterDNS)
}

// TestNoClusterDNSReleasesAndSaysSo: when no cluster DNS runs anywhere, the
// dns check cannot hold the node (every node would be held, and the DNS pods
// with them); the release says so in the condition, an Event and the log.
func TestNoClusterDNSReleasesAndSaysSo(t *testing.T) {
	node := &fakeNode{}
	a := testAgent(t, node, &notCheckable{fakeCheck{name: "dns"}}, &fakeCheck{name: "tcp"})
	var logs syncBuffer
	a.log = a.log.Output(&logs)
	_, _ = runAgent(t, a)

	waitFor(t, "released", a.verified.Load)
	require.Len(t, node.conditions, 1)
	c := node.conditions[0]
	assert.Equal(t, nodepatch.ReasonVerified, c.Reason)
	assert.Equal(t, "1 of 2 checks passed, dns target-dns: skipped: cannot be checked: no cluster DNS is running (kube-system/kube-dns has no ready endpoint): connection refused", c.Message)
	dns := eventsWith(recorder(a), "Warning DNSNotChecked")
	require.Len(t, dns, 1)
	assert.Contains(t, dns[0], "no cluster DNS is running")
	assert.Contains(t, logs.String(), "Cluster DNS is not running anywhere, releasing without the dns check")
}

// TestDNSNotCheckedOnceAtTheRelease: rounds that pass without the dns check but then wait
// (for Karpenter's registration) or fail to release say nothing of a release; the
// DNSNotChecked Event comes once, with the release.
func TestDNSNotCheckedOnceAtTheRelease(t *testing.T) {
	node := &fakeNode{err: nodepatch.ErrNotRegistered}
	a := testAgent(t, node, &notCheckable{fakeCheck{name: "dns"}}, &fakeCheck{name: "tcp"})
	_, _ = runAgent(t, a)

	waitFor(t, "rounds that wait for the registration", func() bool { return node.count() >= 3 })
	assert.Empty(t, eventsWith(recorder(a), "Warning DNSNotChecked"), "nothing was released yet")
	node.set(errors.New("the server is currently unable to handle the request"))
	waitFor(t, "rounds whose release fails", func() bool { return node.count() >= 5 })
	assert.Empty(t, eventsWith(recorder(a), "Warning DNSNotChecked"), "nothing was released yet")
	node.set(nil)
	waitFor(t, "released", a.verified.Load)
	assert.Len(t, eventsWith(recorder(a), "Warning DNSNotChecked"), 1)
}

// TestReplaceRefusals: a control-plane node, a node whose startup taint is gone
// and a node nodeready verified before are never replaced, and that is said once; a refused deletion is tried again each round but reported once
// per error.
func TestReplaceRefusals(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		attempts  func(int) bool
		condition []string
	}{
		{"control-plane node", fmt.Errorf("node node-a: %w", nodepatch.ErrControlPlane),
			func(n int) bool { return n == 1 },
			[]string{nodepatch.ReasonChecksFailed}},
		{"startup taint removed by hand", fmt.Errorf("node node-a has no taint: %w", nodepatch.ErrNotHeld),
			func(n int) bool { return n == 1 },
			[]string{nodepatch.ReasonChecksFailed}},
		{"verified before", fmt.Errorf("node node-a was released by nodeready: %w", nodepatch.ErrVerifiedBefore),
			func(n int) bool { return n == 1 },
			[]string{nodepatch.ReasonChecksFailed}},
		{"deletion forbidden", fmt.Errorf("delete node node-a: %w", nodepatch.ErrForbidden),
			func(n int) bool { return n >= 3 },
			[]string{nodepatch.ReasonChecksFailed}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := &fakeNode{replaceErr: tt.err}
			broken := &fakeCheck{name: "dns"}
			broken.fail.Store(true)
			a := testAgent(t, node, broken)
			a.cfg.MaxRetries = 1
			a.cfg.FailureAction = config.ReplaceNode
			_, _ = runAgent(t, a)

			waitFor(t, "rounds go on", func() bool { return broken.runs.Load() >= 6 })
			assert.True(t, tt.attempts(node.replaced()), "%d attempts", node.replaced())
			// The fake records every write; the real one skips a condition already shown.
			assert.Equal(t, tt.condition, slices.Compact(node.reasons()), "never Replacing: nothing was deleted")
			node.mu.Lock()
			last := node.conditions[len(node.conditions)-1]
			node.mu.Unlock()
			assert.Contains(t, last.Message, "not replaced: "+tt.err.Error())
			assert.Len(t, eventsWith(recorder(a), "Warning ReplaceFailed"), 1)
		})
	}
}

// TestConditionFollowsLatestRound: after the failure is recorded, the condition tells the
// latest round, not the first: a check that healed is no longer named, one that fails now
// is, and once the checks pass but the release is refused it says Misconfigured with the
// refusal. A round like the one before writes nothing.
func TestConditionFollowsLatestRound(t *testing.T) {
	node := &fakeNode{}
	dns, tcp := &fakeCheck{name: "dns"}, &fakeCheck{name: "tcp"}
	dns.fail.Store(true)
	a := testAgent(t, node, dns, tcp)
	a.cfg.MaxRetries = 1
	_, _ = runAgent(t, a)

	last := func() nodepatch.Condition {
		node.mu.Lock()
		defer node.mu.Unlock()
		if len(node.conditions) == 0 {
			return nodepatch.Condition{}
		}
		return node.conditions[len(node.conditions)-1]
	}
	waitFor(t, "the failure of dns", func() bool { return strings.Contains(last().Message, "dns target-dns") })
	assert.Equal(t, nodepatch.ReasonChecksFailed, last().Reason)
	runs := dns.runs.Load()
	waitFor(t, "more rounds", func() bool { return dns.runs.Load() >= runs+2 })
	assert.Len(t, node.reasons(), 1, "rounds like the last write nothing")

	// dns heals, tcp breaks.
	tcp.fail.Store(true)
	dns.fail.Store(false)
	waitFor(t, "the condition names tcp only", func() bool {
		c := last()
		return strings.Contains(c.Message, "tcp target-tcp") && !strings.Contains(c.Message, "dns")
	})
	assert.Equal(t, nodepatch.ReasonChecksFailed, last().Reason)
	waitFor(t, "a CheckFailed Event for tcp", func() bool {
		return len(eventsWith(recorder(a), "Warning CheckFailed tcp target-tcp")) > 0
	})

	// Every check passes; the release is refused.
	node.set(fmt.Errorf("patch node node-a: %w", nodepatch.ErrForbidden))
	tcp.fail.Store(false)
	waitFor(t, "the condition says the release is refused", func() bool { return last().Reason == nodepatch.ReasonMisconfigured })
	assert.Contains(t, last().Message, "release: ")
	assert.NotContains(t, last().Message, "tcp")
	node.set(nil)
	waitFor(t, "released", a.verified.Load)
	assert.Equal(t, nodepatch.ReasonVerified, last().Reason)
}

// TestReleaseFailingOnAWebhook: a webhook on Node UPDATE that is down makes the API server
// answer every release 500 "failed calling webhook"; the node read afterwards shows the write
// did not land. That is a definite failure with the server's message, on the node and in an
// Event, not an unknown outcome waited for in silence; once the webhook is back, the node is
// released.
func TestReleaseFailingOnAWebhook(t *testing.T) {
	webhook := apierrors.NewInternalError(errors.New(`failed calling webhook "nodes.example.com": failed to call webhook: connection refused`))
	node := &fakeNode{err: fmt.Errorf("patch node node-a: %w: %w", nodepatch.ErrUnknownOutcome, webhook)}
	a := testAgent(t, node, &fakeCheck{name: "dns"})
	a.cfg.MaxRetries = 2
	_, _ = runAgent(t, a)

	waitFor(t, "the failure recorded", func() bool { return slices.Contains(node.reasons(), nodepatch.ReasonMisconfigured) })
	node.mu.Lock()
	cond := node.conditions[len(node.conditions)-1]
	node.mu.Unlock()
	assert.Contains(t, cond.Message, "failed calling webhook")
	failed := eventsWith(recorder(a), "Warning ReleaseFailed")
	require.Len(t, failed, 1, "once per distinct error")
	assert.Contains(t, failed[0], "failed calling webhook")

	node.set(nil)
	waitFor(t, "released", a.verified.Load)
	assert.Equal(t, nodepatch.ReasonVerified, node.reasons()[len(node.reasons())-1])
}

// TestMomentaryAPIErrorsAreNotMisconfigurations: a 429 after client-go's retries or a 503
// while the API server is away says nothing about the installation: rounds go on, no
// Misconfigured condition, no ReleaseFailed Event; the node is released when it answers.
func TestMomentaryAPIErrorsAreNotMisconfigurations(t *testing.T) {
	for name, err := range map[string]error{
		"429": apierrors.NewTooManyRequests("the server has received too many requests", 1),
		"503": apierrors.NewServiceUnavailable("the server is currently unable to handle the request"),
	} {
		t.Run(name, func(t *testing.T) {
			node := &fakeNode{err: fmt.Errorf("get node node-a: %w", err)}
			a := testAgent(t, node, &fakeCheck{name: "dns"})
			a.cfg.MaxRetries = 1
			_, _ = runAgent(t, a)

			waitFor(t, "rounds past MAX_RETRIES", func() bool { return node.count() >= 3 })
			assert.Empty(t, node.reasons(), "no condition: nothing failed")
			assert.Empty(t, eventsWith(recorder(a), "Warning ReleaseFailed"))
			assert.Zero(t, testutil.ToFloat64(a.metrics.failures))
			node.set(nil)
			waitFor(t, "released", a.verified.Load)
		})
	}
}
