package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeready/nodeready/checks/dnstest"
	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/kubelet"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// fleet is a harness fleet with what these tests add: every version of its nodes
// (versions), and nodes whose nameserver is one of the test's own (newSlowDNS).
type fleet struct {
	*framework.Fleet
	client   kubernetes.Interface
	versions versions

	mu  sync.Mutex
	dns map[string]*dnstest.Server
}

// fleet starts a fleet; its History records its nodes' versions from the start.
func (e env) fleet(t *testing.T, name string) *fleet {
	t.Helper()
	f := &fleet{Fleet: e.newFleet(t, name), client: e.fw.Client(), dns: map[string]*dnstest.Server{}}
	// Before any node: the kubelet reads its options unlocked when it starts a process.
	f.Kubelet().OverrideEnv(f.dnsEnv)
	f.versions = versions{f.History()}
	return f
}

func (f *fleet) dnsEnv(node string) map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.dns[node]; s != nil {
		return map[string]string{"DNS_NAMESERVER": s.Addr()}
	}
	return nil
}

// addSlowNode adds a node whose agents ask s instead of the fleet's DNS server for it.
func (f *fleet) addSlowNode(ctx context.Context, name string, s *dnstest.Server, o framework.NodeOptions) error {
	f.useDNS(name, s)
	return f.AddNode(ctx, name, o)
}

// useDNS makes the node's agents ask s, from their next start on.
func (f *fleet) useDNS(node string, s *dnstest.Server) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dns[node] = s
}

// addNodes adds n nodes named <fleet>-<prefix><i> at once, each with its own nameserver made
// by newDNS when it is not nil.
func (f *fleet) addNodes(t *testing.T, prefix string, n int, o framework.NodeOptions, newDNS func() *dnstest.Server) []string {
	t.Helper()
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("%s-%s%d", f.Name(), prefix, i)
		var err error
		if newDNS != nil {
			err = f.addSlowNode(t.Context(), names[i], newDNS(), o)
		} else {
			err = f.AddNode(t.Context(), names[i], o)
		}
		if err != nil {
			t.Fatalf("add node: %v", err)
		}
	}
	return names
}

// agentsDone reports whether the kubelet ran at least n agent pods on the node and is
// finished with all of them.
func (f *fleet) agentsDone(node string, n int) bool {
	pods := f.PodsOn(node)
	return len(pods) >= n && !slices.ContainsFunc(pods, func(p kubelet.PodInfo) bool { return !p.Done })
}

// waitAgentsDone waits, on the kubelet's records, until agentsDone.
func (f *fleet) waitAgentsDone(ctx context.Context, node string, n int) error {
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, framework.WaitTimeout, true, func(context.Context) (bool, error) {
		return f.agentsDone(node, n), nil
	})
	if err != nil {
		return fmt.Errorf("agents of %s not done: %d pods, %v: %w", node, len(f.PodsOn(node)), f.PodsOn(node), err)
	}
	return nil
}

// waitRunning waits until an agent process other than those of the pods in skip runs on
// the node, and returns its pod.
func (f *fleet) waitRunning(ctx context.Context, node string, skip map[types.UID]bool) (kubelet.PodInfo, error) {
	var pod kubelet.PodInfo
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, framework.WaitTimeout, true, func(context.Context) (bool, error) {
		for _, p := range f.PodsOn(node) {
			if p.Running && !skip[p.UID] {
				pod = p
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return pod, fmt.Errorf("no new agent running on %s: %w", node, err)
	}
	return pod, nil
}

// onEachNode runs fn for every node at once, with the node's index, and waits for all of
// them; each error it returns fails t.
func onEachNode(t *testing.T, nodes []string, fn func(i int, node string) error) {
	t.Helper()
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { errs[i] = fn(i, n) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// assertExits asserts that every agent process the kubelet ran on the nodes ended with exit
// code 0 on the kubelet's SIGTERM, within the grace period, and was never restarted. It
// returns how many processes ended.
func (f *fleet) assertExits(t *testing.T, nodes ...string) int {
	t.Helper()
	return f.assertExitsBut(t, nil, nodes...)
}

// assertExitsBut is assertExits, but any exit code is right for an exit that uncaught (when
// not nil) accepts: an agent the SIGTERM killed before it could catch it.
func (f *fleet) assertExitsBut(t *testing.T, uncaught func(kubelet.PodInfo, kubelet.Exit) bool, nodes ...string) int {
	t.Helper()
	n := 0
	for _, node := range nodes {
		for _, p := range f.PodsOn(node) {
			assert.Zero(t, p.Restarts, "restarts of %s on %s", p.Name, node)
			for _, e := range p.Exits {
				n++
				if uncaught == nil || !uncaught(p, e) {
					assert.Equal(t, 0, e.Code, "exit code of %s on %s", p.Name, node)
				}
				assert.True(t, e.Signaled, "%s on %s ended on its own, not on the kubelet's SIGTERM", p.Name, node)
				assert.False(t, e.Killed, "%s on %s outlived its grace period", p.Name, node)
			}
		}
	}
	return n
}

// assertStates asserts that each node went through exactly want, in order, as the harness's
// node history saw it, after waiting until it has seen the last of them.
func (f *fleet) assertStates(t *testing.T, want []framework.NodeState, nodes ...string) {
	t.Helper()
	for _, node := range nodes {
		if err := f.History().WaitLatest(t.Context(), node, want[len(want)-1]); err != nil {
			t.Error(err)
			continue
		}
		assert.Equal(t, want, f.History().States(node), "states of %s", node)
	}
}

// assertNeverHalfDone asserts that no version of the nodes was labelled but tainted or
// untainted but unlabelled, and returns how many versions it looked at.
func (f *fleet) assertNeverHalfDone(t *testing.T, nodes ...string) int {
	t.Helper()
	n := 0
	for _, node := range nodes {
		for _, v := range f.versions.of(node) {
			n++
			assert.False(t, v.halfDone(), "node %s half released: %s", node, v)
		}
	}
	return n
}

// jsonPatch is an RFC 6902 JSON Patch.
type jsonPatch []map[string]any

func (p jsonPatch) bytes() []byte {
	b, err := json.Marshal(p)
	if err != nil {
		panic(err)
	}
	return b
}

// reverify puts the startup taint back and removes the verified label in one write, locked
// by a test of the whole taint list and of the label, as an operator's re-verification
// would: the DaemonSet then brings a new agent. It retries lost locks, and returns the
// resourceVersion it wrote.
func reverify(ctx context.Context, client kubernetes.Interface, node string) (int64, error) {
	return addStartupTaint(ctx, client, node, "e2e-reverify", func(*corev1.Node) (jsonPatch, error) {
		return jsonPatch{
			{"op": "test", "path": "/metadata/labels/" + escape(wellknown.VerifiedLabel), "value": "true"},
			{"op": "remove", "path": "/metadata/labels/" + escape(wellknown.VerifiedLabel)},
		}, nil
	})
}

// addStartupTaint adds the startup taint to the node as fieldManager, in one JSON Patch
// locked by a test of the whole taint list, with the operations more returns for the node as
// read (an error of more ends it). It retries lost locks, and returns the resourceVersion it
// wrote.
func addStartupTaint(ctx context.Context, client kubernetes.Interface, node, fieldManager string, more func(*corev1.Node) (jsonPatch, error)) (int64, error) {
	var rv int64
	err := retryLocked(ctx, func() error {
		n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		ops, err := more(n)
		if err != nil {
			return err
		}
		patch := append(jsonPatch{
			{"op": "test", "path": "/spec/taints", "value": n.Spec.Taints},
			{"op": "replace", "path": "/spec/taints", "value": append(slices.Clone(n.Spec.Taints), wellknown.StartupTaint())},
		}, ops...)
		out, err := client.CoreV1().Nodes().Patch(ctx, node, types.JSONPatchType, patch.bytes(), metav1.PatchOptions{FieldManager: fieldManager})
		if err != nil {
			return err
		}
		rv = resourceVersion(out)
		return nil
	})
	return rv, err
}

// resourceVersion returns the node's resourceVersion as a number, to order versions.
func resourceVersion(n *corev1.Node) int64 {
	rv, _ := strconv.ParseInt(n.ResourceVersion, 10, 64)
	return rv
}

// retryLocked runs fn until it does not lose an optimistic lock (409 Conflict, or 422 from
// a failed JSON Patch test), for up to a minute.
func retryLocked(ctx context.Context, fn func() error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		last = fn()
		if apierrors.IsConflict(last) || apierrors.IsInvalid(last) {
			return false, nil
		}
		return true, last
	})
	if wait.Interrupted(err) && last != nil {
		return last
	}
	return err
}

// escape encodes a map key as a JSON Pointer reference token.
func escape(key string) string {
	out := []byte{}
	for i := range len(key) {
		switch key[i] {
		case '~':
			out = append(out, '~', '0')
		case '/':
			out = append(out, '~', '1')
		default:
			out = append(out, key[i])
		}
	}
	return string(out)
}

// taintsOf formats taints for messages.
func taintsOf(taints []corev1.Taint) []string {
	var s []string
	for _, t := range taints {
		s = append(s, t.ToString())
	}
	return s
}

// isGoneOrReplaced: a delete with a UID precondition found the object gone (404) or
// replaced by another of the same name (409).
func isGoneOrReplaced(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsConflict(err)
}
