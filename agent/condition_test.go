package agent

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodeready/nodeready/internal/wellknown"
)

// TestConditionAndEventsTellTheStory: `kubectl describe node` tells a failed verification
// (the condition, an Event per failing check and one naming the failure action) and then
// the recovery.
func TestConditionAndEventsTellTheStory(t *testing.T) {
	srv, dns := dnsServer(t)
	srv.SetBroken(true)
	c := newCluster(heldNode())
	r := runNew(t, c, dns, map[string]string{"CHECKS": "dns,command", "CHECK_COMMAND": "/bin/true", "MAX_RETRIES": "2"})

	waitFor(t, "failure recorded", func() bool { return c.condition(t).Reason == string(wellknown.ChecksFailed) })
	cond := c.condition(t)
	assert.Equal(t, corev1.ConditionFalse, cond.Status)
	assert.Equal(t, string(wellknown.ChecksFailed), cond.Reason)
	assert.True(t, strings.HasPrefix(cond.Message, `dns ok.test.: resolve "ok.test."`), cond.Message)
	checkFailed := c.waitEvent(t, wellknown.CheckFailed)
	assert.Equal(t, corev1.EventTypeWarning, checkFailed.Type)
	assert.Equal(t, cond.Message, checkFailed.Note)
	failed := c.waitEvent(t, wellknown.VerificationFailed)
	assert.Contains(t, failed.Note, "1 of the checks still failing after 2 rounds")
	assert.Contains(t, failed.Note, "failure action: keep-tainted")

	srv.SetBroken(false)
	waitFor(t, "recovered", func() bool { return isVerified(r.Agent) })
	assert.Equal(t, []string{string(wellknown.ChecksFailing), string(wellknown.ChecksFailed), string(wellknown.Verified)}, c.reasons(),
		"held from the first round, then recorded, then released")
	assert.Equal(t, "All 2 checks passed after a failed verification", c.condition(t).Message)
	verified := c.waitEvent(t, wellknown.Verified)
	assert.Equal(t, corev1.EventTypeNormal, verified.Type)
	assert.True(t, strings.HasPrefix(verified.Note, "All 2 checks passed after a failed verification; released in "), verified.Note)

	require.NoError(t, r.stop(t))
	// A check failing again is counted into its Event's series: one Event each.
	assert.ElementsMatch(t, []string{"CheckFailed", "VerificationFailed", "Verified"}, c.eventReasons(t))
	assert.Zero(t, c.requests("delete", ""))
}

// TestConditionWrittenAgainUntilItLands: the release's condition cannot be written (the API
// server is away), so the release does not land; the condition taken back is kept and
// written again, until it lands, and then the release with its condition.
func TestConditionWrittenAgainUntilItLands(t *testing.T) {
	c := newCluster(heldNode())
	var fails atomic.Int32
	fails.Store(3)
	c.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "status" && fails.Add(-1) >= 0 {
			return true, nil, errors.New("connection refused")
		}
		return false, nil, nil
	})
	r := runNew(t, c, passing)

	waitFor(t, "verified", func() bool { return isVerified(r.Agent) })
	waitFor(t, "condition written", func() bool { return c.condition(t).Reason == string(wellknown.Verified) })
	require.NoError(t, r.stop(t))
	// The release's condition, its withdrawal and the withdrawal's retry fail; the next round
	// writes the withdrawal kept, then releases with its condition: the label never lands
	// without it.
	assert.Equal(t, 5, c.requests("patch", "status"), "three writes that failed, two that landed")
	assert.Equal(t, []string{string(wellknown.Verifying), string(wellknown.Verified)}, c.reasons())
}

// TestConditionLastTryAfterSIGTERM: the SIGTERM comes during a release the API server did
// not store (503), and the condition taken back cannot be written either, nor its retry: one
// more try before exiting, so the held node does not keep saying Verified.
func TestConditionLastTryAfterSIGTERM(t *testing.T) {
	c := newCluster(heldNode())
	var status atomic.Int32
	c.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		unavailable := apierrors.NewServiceUnavailable("the server is shutting down")
		if a.GetSubresource() != "status" {
			return true, nil, unavailable
		}
		if n := status.Add(1); n == 2 || n == 3 {
			return true, nil, unavailable
		}
		return false, nil, nil
	})
	r := prepare(t, newAgent(t, Clients{Kube: c.kube()}, passing))
	c.onRelease(r.sigterm)
	require.NoError(t, r.start().wait(t))

	assert.Equal(t, 4, c.requests("patch", "status"), "the release's, two that failed, the last try")
	assert.Equal(t, string(wellknown.Verifying), c.condition(t).Reason)
	assert.NotContains(t, c.node(t).Labels, "node-ready/verified")
}

// TestConditionFollowsLatestRound: after the failure is recorded, the condition tells the
// latest round, not the first: a check that healed is no longer named, one that fails now
// is, and once the checks pass but the release is refused it says Misconfigured with the
// refusal. A round like the one before writes nothing.
func TestConditionFollowsLatestRound(t *testing.T) {
	dnsSrv, dns := dnsServer(t)
	httpBroken, http := httpServer(t)
	dnsSrv.SetBroken(true)
	c := newCluster(heldNode())
	refused := c.fault("patch", "", forbidden)
	refused.Store(false)
	r := runNew(t, c, dns, http, map[string]string{"CHECKS": "dns,http", "MAX_RETRIES": "1"})

	waitFor(t, "the failure of dns", func() bool { return strings.HasPrefix(c.condition(t).Message, "dns ok.test.") })
	assert.Equal(t, string(wellknown.ChecksFailed), c.condition(t).Reason)
	n := rounds(r.Agent)
	waitFor(t, "more rounds", func() bool { return rounds(r.Agent) >= n+2 })
	assert.Equal(t, 1, c.requests("patch", "status"), "rounds like the last write nothing")

	// dns heals, http breaks.
	httpBroken.Store(true)
	dnsSrv.SetBroken(false)
	waitFor(t, "the condition names http only", func() bool {
		m := c.condition(t).Message
		return strings.HasPrefix(m, "http http://") && !strings.Contains(m, "dns")
	})
	assert.Equal(t, string(wellknown.ChecksFailed), c.condition(t).Reason)
	waitFor(t, "a CheckFailed Event for http", func() bool {
		for _, e := range c.eventsOf(t, wellknown.CheckFailed) {
			if strings.HasPrefix(e.Note, "http http://") {
				return true
			}
		}
		return false
	})

	// Every check passes; the release is refused.
	refused.Store(true)
	httpBroken.Store(false)
	waitFor(t, "the condition says the release is refused", func() bool { return c.condition(t).Reason == string(wellknown.Misconfigured) })
	assert.True(t, strings.HasPrefix(c.condition(t).Message, "release: patch node node-a: forbidden"), c.condition(t).Message)
	assert.NotContains(t, c.condition(t).Message, "http")
	refused.Store(false)
	waitFor(t, "released", func() bool { return isVerified(r.Agent) })
	assert.Equal(t, string(wellknown.Verified), c.condition(t).Reason)
	// The condition goes before the label: Verified once when the checks first pass, then why
	// the release is refused, then Verified again only with the label.
	assert.Equal(t, []string{string(wellknown.ChecksFailed), string(wellknown.Verified), string(wellknown.Misconfigured), string(wellknown.Verified)},
		slices.Compact(c.reasons()))
}

// TestHeldNodeSaysWhyFromTheFirstRound: a node held by failing checks says so in its
// condition from the first round with problems (ChecksFailing, never releasing it), long
// before the failure is recorded; a node whose checks pass at once gets its release's
// condition only, in the release's one round trip.
func TestHeldNodeSaysWhyFromTheFirstRound(t *testing.T) {
	c := newCluster(heldNode())
	r := runNew(t, c, failing, map[string]string{"MAX_RETRIES": "1000"})
	waitFor(t, "condition written", func() bool { return len(c.reasons()) > 0 })
	cond := c.condition(t)
	assert.Equal(t, corev1.ConditionFalse, cond.Status)
	assert.Equal(t, string(wellknown.ChecksFailing), cond.Reason)
	assert.Equal(t, failingNote, cond.Message)
	waitFor(t, "more rounds", func() bool { return rounds(r.Agent) >= 4 })
	assert.Equal(t, []string{string(wellknown.ChecksFailing)}, c.reasons(), "written once while the round says the same")
	assert.Zero(t, failures(r.Agent), "no failure recorded yet")

	c = newCluster(heldNode())
	r = runNew(t, c, passing)
	waitFor(t, "released", func() bool { return isVerified(r.Agent) })
	assert.Equal(t, []string{string(wellknown.Verified)}, c.reasons(), "the success path writes the release's condition only")
}

// TestHeldConditionFollowsTheChecksNotTheirErrorTexts: a held node whose check fails with
// another error text each round (a timeout's, on a loaded API server) writes its condition
// once: it says which checks fail and why, and the next rounds' texts add nothing worth a
// write each (a 5000-node burst wrote 6 a node).
func TestHeldConditionFollowsTheChecksNotTheirErrorTexts(t *testing.T) {
	script := filepath.Join(t.TempDir(), "changing")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\necho \"attempt $(date +%s%N)\"\nexit 1\n"), 0o755))
	c := newCluster(heldNode())
	r := runNew(t, c, map[string]string{"CHECKS": "command", "CHECK_COMMAND": script, "MAX_RETRIES": "1000"})
	waitFor(t, "more rounds", func() bool { return rounds(r.Agent) >= 4 })
	assert.Equal(t, []string{string(wellknown.ChecksFailing)}, c.reasons(), "written once while the same check fails")
	assert.Contains(t, c.condition(t).Message, "attempt ", "the first round's error, with its text")
}
