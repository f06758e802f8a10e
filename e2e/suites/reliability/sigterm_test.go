package reliability

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeready/nodeready/checks/dnstest"
	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/kubelet"
)

// moment is when in an agent's life the test deletes its pod.
type moment string

const (
	// atStart: as soon as the kubelet has started the agent's process, so the SIGTERM,
	// which comes through the API server and the kubelet's watch, reaches the agent while
	// it starts, before its checks.
	atStart moment = "start"
	// inChecks: when the agent's DNS check asks the node's slow nameserver, so the SIGTERM
	// reaches it while its checks wait for the answer.
	inChecks moment = "checks"
	// atRandom: at a random time in the first two seconds of the agent's process.
	atRandom moment = "random"
	// atLabel: the instant the node shows the release, while the agent reports it and
	// watches the node, racing the DaemonSet controller's own deletion.
	atLabel moment = "label"
)

var moments = []moment{atStart, inChecks, atRandom, atLabel}

const (
	// abortWithin bounds an abort, from the pod's deletion through the kubelet's SIGTERM to
	// the process's end: at once, not after a check's timeout (CHECK_TIMEOUT is 5s here).
	abortWithin = 2500 * time.Millisecond
)

// sigtermRun is one deletion of an agent pod and what came of it.
type sigtermRun struct {
	node    string
	moment  moment
	pod     kubelet.PodInfo // as the kubelet knew it at the end
	deleted time.Time
	// released: the node was released when the agent ended, by this agent (a deletion
	// after the checks had passed, which the release carries through); otherwise the
	// verification was aborted.
	released bool
	failures float64 // nodeready_verification_failures_total just before the deletion; -1 not scraped
}

// TestSIGTERMAtAnyMoment deletes agent pods (the kubelet then sends SIGTERM, as in a
// cluster) at every moment of their lives, over more than a hundred runs, on nodes whose
// DNS answers slowly so the checks take a while. Every agent exits 0 within its grace period
// (but for a SIGTERM that comes before the process has a signal handler at all, in its first
// milliseconds: counted apart); an abort ends the process at once; no node is ever labelled
// without the taint removal or the reverse; no abort is recorded as a failure (metric,
// Events, condition); the DaemonSet brings a new agent after each deletion, and every node
// ends verified.
func TestSIGTERMAtAnyMoment(t *testing.T) {
	const (
		nodes   = 10
		runs    = 11 // per node
		dnsWait = time.Second
	)
	e := setup(t)
	f := e.fleet(t, "sigterm")
	client := e.fw.Client()
	ctx := t.Context()
	dns := map[string]*dnstest.Server{}
	names := f.addNodes(t, "", nodes, framework.NodeOptions{}, func() *dnstest.Server { return newSlowDNS(t, dnsWait) })
	f.mu.Lock()
	for _, n := range names {
		dns[n] = f.dns[n]
	}
	f.mu.Unlock()

	var mu sync.Mutex
	var all []sigtermRun
	onEachNode(t, names, func(i int, n string) error {
		rng := rand.New(rand.NewPCG(uint64(i), 42))
		seen := map[types.UID]bool{}
		for r := range runs {
			run, err := sigtermOnce(ctx, f, dns[n], n, moments[(i+r)%len(moments)], seen, rng)
			if err != nil {
				return fmt.Errorf("node %s, run %d (%s): %w", n, r, moments[(i+r)%len(moments)], err)
			}
			mu.Lock()
			all = append(all, run)
			mu.Unlock()
			if run.released && r < runs-1 {
				// Verified: start over, with a new agent.
				if err := f.waitAgentsDone(ctx, n, len(seen)); err != nil {
					return err
				}
				if _, err := reverify(ctx, client, n); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if t.Failed() {
		return
	}

	// After the last deletion the DaemonSet's new agent, left alone, verifies the node.
	require.NoError(t, f.WaitReleased(ctx, names...))
	for _, n := range names {
		require.NoError(t, f.waitAgentsDone(ctx, n, 1))
	}

	type tally struct{ runs, uncaught, aborted, released int }
	byMoment := map[moment]*tally{}
	byPod := map[types.UID]sigtermRun{}
	var slowestAbort, slowestRelease time.Duration
	for _, r := range all {
		byPod[r.pod.UID] = r
		tl := byMoment[r.moment]
		if tl == nil {
			tl = &tally{}
			byMoment[r.moment] = tl
		}
		tl.runs++
		if r.failures > 0 {
			t.Errorf("node %s: agent %s had recorded %v failures before its pod was deleted (%s)", r.node, r.pod.Name, r.failures, r.moment)
		}
		if !assert.Len(t, r.pod.Exits, 1, "exits of %s", r.pod.Name) {
			continue
		}
		exit := r.pod.Exits[0]
		took := exit.At.Sub(r.deleted)
		switch {
		case uncaught(f, r.pod, exit) && r.moment == atStart:
			// Killed by the signal itself: it came before the process had a handler.
			tl.uncaught++
		case r.released:
			tl.released++
			slowestRelease = max(slowestRelease, took)
		default:
			tl.aborted++
			slowestAbort = max(slowestAbort, took)
			assert.Less(t, took, abortWithin, "%s on %s: abort took %s after the deletion", r.pod.Name, r.node, took)
		}
	}
	// Every agent process, deleted by the test or not, ended on the kubelet's SIGTERM with
	// exit code 0 within its grace period, but for those the SIGTERM killed before they
	// could catch it (counted above).
	exits := f.assertExitsBut(t, func(p kubelet.PodInfo, e kubelet.Exit) bool {
		r, tested := byPod[p.UID]
		return tested && r.moment == atStart && uncaught(f, p, e)
	}, names...)
	versionsSeen := f.assertNeverHalfDone(t, names...)
	for _, n := range names {
		for _, s := range f.History().States(n) {
			assert.Contains(t, []framework.NodeState{framework.Unverified, framework.Released}, s, "node %s went through %s", n, s)
		}
		for _, v := range f.versions.of(n) {
			if v.Verdict != nil {
				assert.NotEqual(t, "False", string(v.Verdict.Status), "node %s: condition %s/%s after an abort", n, v.Verdict.Reason, v.Verdict.Message)
			}
		}
	}
	failed := nodeEvents(t, ctx, client, names, failureReasons...)
	assert.Empty(t, failed, "failure Events after aborts")

	var b strings.Builder
	fmt.Fprintf(&b, "%-8s %5s %8s %9s %9s\n", "MOMENT", "RUNS", "ABORTED", "RELEASED", "UNCAUGHT")
	total, uncaught := 0, 0
	for _, m := range moments {
		tl := byMoment[m]
		if tl == nil {
			tl = &tally{}
		}
		total += tl.runs
		uncaught += tl.uncaught
		fmt.Fprintf(&b, "%-8s %5d %8d %9d %9d\n", m, tl.runs, tl.aborted, tl.released, tl.uncaught)
	}
	assert.GreaterOrEqual(t, total, 100, "runs")
	t.Logf("pods deleted at every moment, %d runs on %d nodes (released: the SIGTERM came after the checks had passed, and the agent carried its release through; uncaught: the SIGTERM came before the process had a signal handler, and killed it before it wrote a line):\n%s",
		total, nodes, b.String())
	t.Logf("%d agent processes, %d of them exit 0 on SIGTERM within the grace period, %d killed by a SIGTERM they could not catch yet; slowest exit after the deletion: %s aborting, %s carrying a release through; %d node versions, none half released; no failure recorded (metric, Events, condition)",
		exits, exits-uncaught, uncaught, slowestAbort.Round(time.Millisecond), slowestRelease.Round(time.Millisecond), versionsSeen)
}

// sigtermOnce waits for a new agent pod on the node (one not in seen, which it adds),
// deletes it at the moment m and waits until the kubelet is finished with it.
func sigtermOnce(ctx context.Context, f *fleet, dns *dnstest.Server, node string, m moment, seen map[types.UID]bool, rng *rand.Rand) (sigtermRun, error) {
	run := sigtermRun{node: node, moment: m, failures: -1}
	from, _ := f.versions.latest(node)
	if m == inChecks {
		// No answer until the deletion: whenever the agent asks, its checks are under way.
		dns.Hold()
		defer dns.Open()
	}

	// The new pod, once its process runs. (Deleting a pod the kubelet has not started yet
	// would test the simulated kubelet: it starts the process and signals it in the same
	// instant, before any program could have a signal handler, where a real kubelet does
	// not start the containers of a pod it knows is being deleted.)
	var pod kubelet.PodInfo
	err := wait.PollUntilContextTimeout(ctx, time.Millisecond, framework.WaitTimeout, true, func(context.Context) (bool, error) {
		for _, p := range f.PodsOn(node) {
			if !seen[p.UID] && !p.Done && p.Running {
				pod = p
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return run, fmt.Errorf("no new agent pod: %w", err)
	}
	seen[pod.UID] = true

	switch m {
	case inChecks:
		// A query of this agent. Should it have asked before the count, it asks again
		// within CHECK_TIMEOUT: its check cannot pass while the answers are held.
		queries, _ := dns.Queries()
		if err := waitQuery(ctx, dns, queries); err != nil {
			return run, err
		}
	case atRandom:
		pause(ctx, time.Duration(rng.Int64N(int64(2*time.Second))))
	case atLabel:
		if _, err := f.versions.waitFor(ctx, node, framework.WaitTimeout, "released", func(v nodeVersion) bool { return v.RV > from.RV && v.released() }); err != nil {
			return run, err
		}
	}
	if m != atStart {
		if p, ok := f.Kubelet().Pod(pod.UID); ok && p.Running {
			if s, err := scrapeAgent(ctx, p.MetricsAddr); err == nil {
				run.failures = s["nodeready_verification_failures_total"]
			}
		}
	}
	run.deleted = time.Now()
	err = f.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(pod.UID))})
	if err != nil && !isGoneOrReplaced(err) {
		return run, fmt.Errorf("delete pod %s: %w", pod.Name, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, framework.WaitTimeout, true, func(context.Context) (bool, error) {
		p, _ := f.Kubelet().Pod(pod.UID)
		run.pod = p
		return p.Done, nil
	})
	if err != nil {
		return run, fmt.Errorf("pod %s not done after its deletion: %w", pod.Name, err)
	}
	if len(run.pod.Exits) > 0 {
		end := run.pod.Exits[len(run.pod.Exits)-1].At
		vs := f.versions.of(node)
		i := slices.IndexFunc(vs, func(v nodeVersion) bool { return v.At.After(end) })
		if i < 0 {
			i = len(vs)
		}
		run.released = i > 0 && vs[i-1].released()
	}
	return run, nil
}

// waitQuery waits until the server has received more than n queries.
func waitQuery(ctx context.Context, s *dnstest.Server, n int64) error {
	timeout := time.NewTimer(framework.WaitTimeout)
	defer timeout.Stop()
	for {
		got, next := s.Queries()
		if got > n {
			return nil
		}
		select {
		case <-next:
		case <-ctx.Done():
			return ctx.Err()
		case <-timeout.C:
			return fmt.Errorf("no DNS query within %s", framework.WaitTimeout)
		}
	}
}

// uncaught reports whether the SIGTERM killed the agent process outright, before it had a
// signal handler. The handler comes with the process's package initialisation
// (internal/wiring/sigterm), before main writes its first line: a process killed by the
// signal after it wrote anything had a gap in its signal handling. When that happens in
// time depends on the machine's load (a second and more on a busy 2-core machine), what
// it wrote does not.
func uncaught(f *fleet, p kubelet.PodInfo, e kubelet.Exit) bool {
	if e.Code != 128+int(syscall.SIGTERM) || !e.Signaled || p.Restarts > 0 {
		return false
	}
	out, err := os.ReadFile(filepath.Join(f.LogDir(), fmt.Sprintf("%s_%s_0.log", p.Namespace, p.Name)))
	return (err == nil || errors.Is(err, fs.ErrNotExist)) && len(out) == 0
}
