package agent

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodeready/nodeready/checks"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// TestRunReleasesThenWaitsForSIGTERM: checks that pass release the node in one write that
// leaves other taints and labels alone, and the agent then waits for its SIGTERM (a
// DaemonSet pod restarts whenever it exits) without writing again.
func TestRunReleasesThenWaitsForSIGTERM(t *testing.T) {
	_, dns := dnsServer(t)
	c := newCluster(heldNode())
	r := runNew(t, c, dns, map[string]string{"CHECKS": "dns,command", "CHECK_COMMAND": "/bin/true"})

	waitFor(t, "verified", func() bool { return isVerified(r.Agent) })
	node := c.node(t)
	assert.Equal(t, []corev1.Taint{otherTaint}, node.Spec.Taints)
	assert.Equal(t, map[string]string{"kubernetes.io/hostname": nodeName, "node-ready/verified": "true",
		"node-ready/verified-config": r.fleet.configValue(r.started)}, node.Labels, "the label, and the configuration it was verified with")
	assert.Contains(t, node.Annotations, "node-ready/verified-at")
	assert.Contains(t, node.Annotations, "node-ready/verified-duration")
	cond := c.condition(t)
	assert.Equal(t, corev1.ConditionTrue, cond.Status)
	assert.Equal(t, "All 2 checks passed", cond.Message)
	assert.Contains(t, c.waitEvent(t, wellknown.Verified).Note, "All 2 checks passed; released in ")
	assert.Equal(t, 1.0, patchesOf(r.Agent, "patched"))
	assert.Positive(t, testutil.ToFloat64(r.metrics.timeToVerified))
	// Only a while can show that something does not happen.
	assert.Never(t, r.returned, 100*time.Millisecond, 10*time.Millisecond, "returned on its own after success")

	writes := c.writes()
	require.NoError(t, r.stop(t))
	assert.Equal(t, 1, c.requests("patch", ""), "one release")
	assert.Equal(t, writes, c.writes(), "a write after success")
}

// TestRunAbortDuringChecksWritesNothing: a SIGTERM while the checks run ends the agent at
// once, leaving the node, its condition and its Events as they were.
func TestRunAbortDuringChecksWritesNothing(t *testing.T) {
	srv, dns := dnsServer(t)
	srv.Hold()
	c := newCluster(heldNode())
	r := runNew(t, c, dns, map[string]string{"CHECKS": "dns", "CHECK_TIMEOUT": "1m"})

	waitFor(t, "the check asked", func() bool { n, _ := srv.Queries(); return n > 0 })
	r.abort(t)
	assert.Zero(t, c.writes(), "a write on abort")
	assert.Empty(t, c.events(t), "an Event on abort")
	assert.Equal(t, heldNode().Spec.Taints, c.node(t).Spec.Taints)
	assert.Zero(t, failures(r.Agent), "a failure recorded on abort")
	assert.Zero(t, rounds(r.Agent), "an aborted round recorded")
	assert.False(t, isVerified(r.Agent))
}

// stubbornCheck ignores its context: it returns only when released, as a resolver that
// waits for its read deadline does.
type stubbornCheck struct {
	started chan struct{}
	release chan struct{}
}

func (c *stubbornCheck) Name() string   { return "dns" }
func (c *stubbornCheck) Target() string { return "target-dns" }
func (c *stubbornCheck) Run(context.Context) error {
	close(c.started)
	<-c.release
	return nil
}

// TestRunAbortDoesNotWaitForChecks: a SIGTERM during the checks aborts at once, also when a
// check does not notice its context ending.
func TestRunAbortDoesNotWaitForChecks(t *testing.T) {
	c := newCluster(heldNode())
	a := newAgent(t, Clients{Kube: c.kube()}, passing, map[string]string{"CHECK_TIMEOUT": "1m"})
	// Every check built from config honours its context: this one stands in for one that
	// does not.
	check := &stubbornCheck{started: make(chan struct{}), release: make(chan struct{})}
	defer close(check.release)
	a.checks = []checks.Check{check}
	r := start(t, a)

	<-check.started
	r.abort(t)
	assert.Zero(t, c.writes(), "a write on abort")
	assert.Zero(t, rounds(a), "an aborted round recorded")
}

// TestRunRecordsFailureOnceAndReleasesWhenHealed: a failing check holds the node; the
// failure is recorded once, the rounds go on, and the node is released once it heals.
func TestRunRecordsFailureOnceAndReleasesWhenHealed(t *testing.T) {
	srv, dns := dnsServer(t)
	srv.SetBroken(true)
	c := newCluster(heldNode())
	r := runNew(t, c, dns, map[string]string{"CHECKS": "dns,command", "CHECK_COMMAND": "/bin/true", "MAX_RETRIES": "3"})

	waitFor(t, "failure recorded", func() bool { return failures(r.Agent) == 1 })
	waitFor(t, "checks go on after the failure", func() bool { return rounds(r.Agent) >= 6 })
	assert.Equal(t, 1.0, failures(r.Agent), "recorded once, not every round")
	c.waitEvent(t, wellknown.VerificationFailed)
	assert.Zero(t, c.requests("patch", ""), "a failing node released")
	assert.Equal(t, 0.0, testutil.ToFloat64(r.metrics.checkSuccess.WithLabelValues("dns")))
	assert.Equal(t, 1.0, testutil.ToFloat64(r.metrics.checkSuccess.WithLabelValues("command")))

	srv.SetBroken(false) // the node heals
	waitFor(t, "released after healing", func() bool { return isVerified(r.Agent) })
	assert.Equal(t, 1, c.requests("patch", ""))
	assert.Equal(t, "true", c.node(t).Labels["node-ready/verified"])
	assert.False(t, r.returned())
	require.NoError(t, r.stop(t))
	c.emittedOnce(t, wellknown.VerificationFailed)
}

// TestMinHoldTimeWaitsWithoutFailing: checks that pass before MIN_HOLD_TIME ends wait for
// it, run once more, and then release; the waiting never counts as a failure, however few
// rounds MAX_RETRIES allows.
func TestMinHoldTimeWaitsWithoutFailing(t *testing.T) {
	c := newCluster(heldNode())
	r := runNew(t, c, passing, map[string]string{"MIN_HOLD_TIME": "300ms", "MAX_RETRIES": "1"})

	waitFor(t, "released after the hold", func() bool { return isVerified(r.Agent) })
	held, err := time.ParseDuration(c.node(t).Annotations["node-ready/verified-duration"])
	require.NoError(t, err)
	assert.GreaterOrEqual(t, held, 300*time.Millisecond, "released before the hold ended")
	assert.GreaterOrEqual(t, testutil.ToFloat64(r.metrics.timeToVerified), 0.3)
	assert.Equal(t, 2.0, testutil.ToFloat64(r.metrics.checksTotal.WithLabelValues("command", "pass")), "the checks run again when the hold ends")
	assert.Equal(t, 1, c.requests("patch", ""))
	assert.Zero(t, failures(r.Agent), "holding is failing")
	assert.Equal(t, []string{string(wellknown.Verified)}, c.reasons())
}

// TestMinHoldTimeAbort: a SIGTERM during MIN_HOLD_TIME writes nothing.
func TestMinHoldTimeAbort(t *testing.T) {
	c := newCluster(heldNode())
	r := runNew(t, c, passing, map[string]string{"MIN_HOLD_TIME": "1h"})

	waitFor(t, "checks ran", func() bool { return rounds(r.Agent) == 1 })
	r.abort(t)
	assert.Zero(t, c.writes(), "a write during the hold")
	assert.Empty(t, c.events(t))
}
