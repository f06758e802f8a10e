package failure

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// testFleetEvidence holds that a failure action runs only with evidence from the fleet that
// the fault is the node's own (docs/checks.md, "A fault the fleet shares"), on the real API
// server with the agents' own writes and reads, for replace-node and fail-open alike:
//
//   - a fault every joining node shares: no node is deleted or released, each says why;
//   - a lone broken node among healthy ones of the same configuration: still acted on;
//   - a configuration change that breaks every node, after nodes had passed with the old
//     one: no action;
//   - a burst in which some nodes are broken and the others healthy: the broken ones only.
//
// Each scenario has a configuration of its own (its CHECK_TIMEOUT), so that the nodes of the
// others, verified on the same control plane, are no evidence for it.
func testFleetEvidence(t *testing.T, fw *framework.Framework) {
	out, err := fw.KubectlContext(t.Context(), "apply", "-f", filepath.Join(fw.RepoRoot(), "manifests", "replace-node"))
	require.NoError(t, err, out)
	timeout := 3 // seconds of CHECK_TIMEOUT, a configuration per scenario
	for _, a := range []action{replaceNode, failOpen} {
		for _, sc := range []struct {
			name string
			run  func(*testing.T, *framework.Framework, action, map[string]string)
		}{
			{"a fault every joining node shares acts on none", sharedFault},
			{"a lone broken node among healthy ones is acted on", loneBroken},
			{"a configuration change that breaks every node acts on none", configChange},
			{"a burst of broken and healthy nodes acts on the broken ones", mixedBurst},
		} {
			env := a.env(fmt.Sprintf("%ds", timeout))
			timeout++
			fw.Run(a.name+": "+sc.name, func(t *testing.T, fw *framework.Framework) { sc.run(t, fw, a, env) })
		}
	}
}

// action is a failure action as the tests set and observe it.
type action struct {
	name string
	// short names the fleets of its scenarios, apart from the other action's: the Events of
	// a node outlive it, and a fleet's node names are its name and a number.
	short string
	env   func(checkTimeout string) map[string]string
	// doing is how the SharedFault Event names it.
	doing string
}

var (
	replaceNode = action{name: "replace-node", short: "rn", doing: "Not replacing the node", env: func(ct string) map[string]string {
		return map[string]string{"FAILURE_ACTION": "replace-node", "MAX_RETRIES": "2", "CHECK_TIMEOUT": ct}
	}}
	failOpen = action{name: "fail-open", short: "fo", doing: "Not failing open", env: func(ct string) map[string]string {
		return map[string]string{"FAILURE_ACTION": "fail-open", "FAIL_OPEN_AFTER": "1s", "MAX_RETRIES": "2", "CHECK_TIMEOUT": ct}
	}}
)

// waitActed waits until the action was carried out on node: replace-node deleted it (no
// NodeClaim owns it), fail-open released it as failed open.
func (a action) waitActed(t *testing.T, fw *framework.Framework, node string) {
	t.Helper()
	err := framework.Poll(t, func(ctx context.Context) (bool, error) {
		n, err := fw.Client().CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if a.name == replaceNode.name {
			return apierrors.IsNotFound(err), nil
		}
		return err == nil && n.Labels[wellknown.VerifiedLabel] == wellknown.FailedOpenValue, nil
	})
	require.NoError(t, err, "%s was not carried out on node %s", a.name, node)
}

// requireWithheld waits until node says its action is withheld for a shared fault, gives it
// time for more rounds (each could act), and requires that nothing was done to it.
func (a action) requireWithheld(t *testing.T, fw *framework.Framework, f *framework.Fleet, node, why string) {
	t.Helper()
	cond := fw.WaitCondition(node, string(wellknown.SharedFault))
	assert.Contains(t, cond.Message, "dns ")
	assert.Contains(t, cond.Message, "failure action withheld, the fault looks shared: "+why)
	ev := fw.WaitEvent(node, string(wellknown.SharedFault))
	assert.Contains(t, ev.Note, a.doing+": the fault looks shared")
	agent, err := f.WaitAgentRunning(t.Context(), node)
	require.NoError(t, err)
	require.NoError(t, f.WaitMetric(t.Context(), agent, `nodeready_shared_fault{check="dns"}`, 1), "the series NodeReadySharedFault reads")
	f.WaitMoreRounds(node, 3) // past FAIL_OPEN_AFTER, each round with the action due
	fw.RequireHeld(node)
	fw.RequireNoEvent(node, string(wellknown.ReplacingNode))
	fw.RequireNoEvent(node, string(wellknown.FailedOpen))
}

// requireNXDOMAIN proves the fault real: the node's DNS server answers name with NXDOMAIN.
func requireNXDOMAIN(t *testing.T, f *framework.Fleet, node, name string) {
	t.Helper()
	addr := f.DNS(node).Addr()
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err := r.LookupHost(ctx, name)
	var dnsErr *net.DNSError
	require.True(t, errors.As(err, &dnsErr) && dnsErr.IsNotFound, "node %s's DNS server does not answer %s with NXDOMAIN: %v", node, name, err)
}

// sharedFault: every node of the configuration fails dns, none passed.
func sharedFault(t *testing.T, fw *framework.Framework, a action, env map[string]string) {
	ctx := t.Context()
	f := fw.NewFleet("shared-" + a.short)
	nodes := []string{f.Name() + "-0", f.Name() + "-1", f.Name() + "-2"}
	for _, n := range nodes {
		require.NoError(t, f.AddNode(ctx, n, framework.NodeOptions{BrokenDNS: true, Env: env}))
		requireNXDOMAIN(t, f, n, framework.DNSName)
	}
	for _, n := range nodes {
		a.requireWithheld(t, fw, f, n, "no node of this configuration passed in the last 10m0s")
		failing := fw.Node(n)
		assert.Equal(t, "dns", failing.Annotations[wellknown.FailingAnnotation(wellknown.VerifiedLabel)], "node %s's evidence for the others", n)
		assert.NotEmpty(t, failing.Labels[wellknown.ConfigLabel(wellknown.VerifiedLabel)])
	}
}

// loneBroken: two healthy nodes pass, then one of the same configuration fails dns.
func loneBroken(t *testing.T, fw *framework.Framework, a action, env map[string]string) {
	ctx := t.Context()
	f := fw.NewFleet("lone-" + a.short)
	healthy, broken := []string{f.Name() + "-0", f.Name() + "-1"}, f.Name()+"-2"
	for _, n := range healthy {
		require.NoError(t, f.AddNode(ctx, n, framework.NodeOptions{Env: env}))
	}
	require.NoError(t, f.WaitReleased(ctx, healthy...))
	require.NoError(t, f.AddNode(ctx, broken, framework.NodeOptions{BrokenDNS: true, Env: env}))
	requireNXDOMAIN(t, f, broken, framework.DNSName)
	a.waitActed(t, fw, broken)
	if a.name == failOpen.name {
		fw.WaitEvent(broken, string(wellknown.FailedOpen))
	} else {
		fw.WaitEvent(broken, string(wellknown.ReplacingNode))
	}
}

// configChange: nodes pass under one configuration; the next, whose DNS_TEST_DOMAINS no node
// can resolve, fails every node: the nodes verified before are no evidence for it.
func configChange(t *testing.T, fw *framework.Framework, a action, env map[string]string) {
	ctx := t.Context()
	f := fw.NewFleet("change-" + a.short)
	old := []string{f.Name() + "-0", f.Name() + "-1"}
	for _, n := range old {
		require.NoError(t, f.AddNode(ctx, n, framework.NodeOptions{Env: env}))
	}
	require.NoError(t, f.WaitReleased(ctx, old...))
	const missing = "not-in-this-cluster.example"
	changed := map[string]string{"DNS_TEST_DOMAINS": missing}
	for k, v := range env {
		changed[k] = v
	}
	fresh := []string{f.Name() + "-2", f.Name() + "-3"}
	for _, n := range fresh {
		require.NoError(t, f.AddNode(ctx, n, framework.NodeOptions{Env: changed}))
		requireNXDOMAIN(t, f, n, missing)
	}
	for _, n := range fresh {
		a.requireWithheld(t, fw, f, n, "no node of this configuration passed")
		assert.NotEqual(t, fw.Node(old[0]).Labels[wellknown.ConfigLabel(wellknown.VerifiedLabel)][:10],
			fw.Node(n).Labels[wellknown.ConfigLabel(wellknown.VerifiedLabel)][:10], "the configurations' fingerprints")
	}
}

// mixedBurst: five healthy and two broken nodes of one configuration join at once.
func mixedBurst(t *testing.T, fw *framework.Framework, a action, env map[string]string) {
	ctx := t.Context()
	f := fw.NewFleet("burst-" + a.short)
	var healthy, broken []string
	for i := range 7 {
		n := fmt.Sprintf("%s-%d", f.Name(), i)
		opts := framework.NodeOptions{Env: env, BrokenDNS: i%4 == 3} // 3 and 6
		require.NoError(t, f.AddNode(ctx, n, opts))
		if opts.BrokenDNS {
			broken = append(broken, n)
		} else {
			healthy = append(healthy, n)
		}
	}
	require.NoError(t, f.WaitReleased(ctx, healthy...))
	for _, n := range broken {
		requireNXDOMAIN(t, f, n, framework.DNSName)
		a.waitActed(t, fw, n)
	}
	for _, n := range healthy {
		assert.Equal(t, wellknown.VerifiedLabelValue, fw.Node(n).Labels[wellknown.VerifiedLabel], "node %s", n)
	}
}
