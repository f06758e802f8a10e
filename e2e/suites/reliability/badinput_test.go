package reliability

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeready/nodeready/e2e/framework"
	"github.com/nodeready/nodeready/e2e/framework/kubelet"
	"github.com/nodeready/nodeready/internal/kube/adapt"
	"github.com/nodeready/nodeready/internal/wellknown"
	"github.com/nodeready/nodeready/nodepatch"
)

// TestBadInput runs agents on nodes and with settings that are odd but valid, and shows
// what the API server itself refuses, so that no agent can meet it:
//
//   - taints the API server refuses: duplicates of the startup taint (same key and effect,
//     whatever the value), an unknown effect, an invalid key;
//   - a startup taint with another value (removed: the key and effect make it the startup
//     taint), and taints with the startup taint's key and other effects (left alone);
//   - DNS names in upper case and with a trailing dot (they resolve);
//   - an HTTP check whose URL redirects twice (followed), and one whose server sends an
//     endless body (passes without reading it all);
//   - a node that already carries the verified label with another value (set to the
//     configured value by nodepatch on the real API server; the shipped DaemonSet never
//     runs an agent there: its affinity is node-ready/verified DoesNotExist).
func TestBadInput(t *testing.T) {
	e := setup(t)
	f := e.fleet(t, "badinput")
	client := e.fw.Client()
	ctx := t.Context()

	// What the API server refuses.
	refused := map[string][]corev1.Taint{
		"duplicate startup taint": {wellknown.StartupTaint(), wellknown.StartupTaint()},
		"startup taint twice with different values": {wellknown.StartupTaint(),
			{Key: wellknown.StartupTaint().Key, Value: "again", Effect: wellknown.StartupTaint().Effect}},
		"unknown effect": {wellknown.StartupTaint(), {Key: "example.com/odd", Effect: "NoRun"}},
		"invalid key":    {wellknown.StartupTaint(), {Key: "example.com/bad key!", Effect: corev1.TaintEffectNoSchedule}},
	}
	for what, taints := range refused {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "badinput-refused", Labels: map[string]string{framework.FleetLabel: f.Name()}},
			Spec:       corev1.NodeSpec{Taints: taints},
		}
		_, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if !assert.True(t, apierrors.IsInvalid(err), "%s: want 422 Invalid, got %v", what, err) && err == nil {
			_ = client.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{})
		}
	}

	// Odd but valid taints, through the kubelet: the harness would add its own startup
	// taint to a node with another value of it.
	otherValue := "badinput-taint-value"
	f.useDNS(otherValue, newSlowDNS(t, 0)) // the fleet gives a DNS server only to its own nodes
	require.NoError(t, f.Kubelet().AddNode(ctx, otherValue, nodeOptions(f, []corev1.Taint{
		{Key: wellknown.StartupTaint().Key, Value: "pending", Effect: wellknown.StartupTaint().Effect},
		{Key: wellknown.StartupTaint().Key, Value: "true", Effect: corev1.TaintEffectNoExecute},
	})))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = f.Kubelet().RemoveNode(ctx, otherValue)
	})

	// DNS names in other spellings; redirects; an endless body.
	var okHits, endlessBytes atomic.Int64
	endlessDone := make(chan struct{}, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("/start", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/hop", http.StatusFound) })
	mux.HandleFunc("/hop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok", http.StatusMovedPermanently) })
	mux.HandleFunc("/ok", func(w http.ResponseWriter, _ *http.Request) {
		okHits.Add(1)
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("/endless", func(w http.ResponseWriter, r *http.Request) {
		defer func() { endlessDone <- struct{}{} }()
		chunk := []byte(strings.Repeat("nodeready ", 3277)) // 32 KiB
		for r.Context().Err() == nil {
			n, err := w.Write(chunk)
			endlessBytes.Add(int64(n))
			if err != nil {
				return
			}
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	withHTTP := func(url string) map[string]string {
		return map[string]string{"CHECKS": "dns,tcp,apiserver,endpoints,http", "HTTP_URLS": url}
	}
	spellings := map[string]map[string]string{
		"badinput-upper":     {"DNS_TEST_DOMAINS": strings.ToUpper(framework.DNSName)},
		"badinput-dot":       {"DNS_TEST_DOMAINS": framework.DNSName + "."},
		"badinput-upper-dot": {"DNS_TEST_DOMAINS": "Kubernetes.DEFAULT.svc.Cluster.Local."},
		"badinput-redirect":  withHTTP(srv.URL + "/start"),
		"badinput-endless":   withHTTP(srv.URL + "/endless"),
	}
	for name, env := range spellings {
		require.NoError(t, f.AddNode(ctx, name, framework.NodeOptions{Env: env}))
	}
	names := []string{otherValue}
	for name := range spellings {
		names = append(names, name)
	}
	for name := range spellings {
		require.NoError(t, f.WaitReleased(ctx, name))
	}
	v, err := f.versions.waitFor(ctx, otherValue, framework.WaitTimeout, "released", nodeVersion.released)
	require.NoError(t, err)
	var sameKey []corev1.Taint // the node lifecycle controller's not-ready taint may be there too
	for _, tn := range v.Taints {
		if tn.Key == wellknown.StartupTaint().Key {
			sameKey = append(sameKey, tn)
		}
	}
	assert.Equal(t, []string{wellknown.StartupTaint().Key + "=true:NoExecute"}, taintsOf(sameKey), "%s: the startup taint with another value removed, the other effect kept", otherValue)
	for _, n := range names {
		require.NoError(t, f.waitAgentsDone(ctx, n, 1))
		assert.Len(t, f.PodsOn(n), 1, "agents on %s", n)
	}
	f.assertStates(t, []framework.NodeState{framework.Unverified, framework.Released}, names[1:]...)
	versionsSeen := f.assertNeverHalfDone(t, names...)
	exits := f.assertExits(t, names...)
	assert.Empty(t, nodeEvents(t, ctx, client, names, failureReasons...), "failure Events")
	assert.Positive(t, okHits.Load(), "the redirects were not followed to /ok")
	select {
	case <-endlessDone:
	case <-time.After(framework.WaitTimeout):
		t.Error("the endless body's handler still runs: the agent did not close the connection")
	}
	assert.Less(t, endlessBytes.Load(), int64(16<<20), "bytes of the endless body sent before the agent closed the connection")

	// The verified label with another value, released by nodepatch on the real API server.
	labelled := "badinput-label-value"
	require.NoError(t, f.Kubelet().AddNode(ctx, labelled, nodeOptions(f, []corev1.Taint{wellknown.StartupTaint()}, wellknown.VerifiedLabel, "false")))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = f.Kubelet().RemoveNode(ctx, labelled)
	})
	p := nodepatch.New(adapt.Clientset(client), labelled, nodepatch.Spec{Taints: []corev1.Taint{wellknown.StartupTaint()}, LabelKey: wellknown.VerifiedLabel, LabelValue: "true"})
	outcome, err := p.Release(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, nodepatch.Patched, outcome)
	node, err := client.CoreV1().Nodes().Get(ctx, labelled, metav1.GetOptions{})
	require.NoError(t, err)
	released := nodeVersion{Taints: node.Spec.Taints, Labels: node.Labels}
	assert.True(t, released.released(), "node %s: %s", labelled, released)
	assert.Empty(t, f.PodsOn(labelled), "an agent ran on a node labelled %s=false", wellknown.VerifiedLabel)

	t.Logf("refused by the API server (no agent can meet them): %d kinds of malformed or duplicate taints", len(refused))
	t.Logf("released with odd input: %d nodes (startup taint with another value, other effects kept, DNS names in upper case and with a trailing dot, two redirects followed to /ok (%d hits), an endless body cut after %d KiB); %d agents exit 0; %d node versions, none half released",
		len(names), okHits.Load(), endlessBytes.Load()>>10, exits, versionsSeen)
	t.Logf("the verified label with the value false: set to true and the taint removed by nodepatch on the real API server; no agent runs there with the shipped DaemonSet")
}

// nodeOptions returns what the fleet gives its nodes (its label and the foreign label),
// with the taints and label key=value given here instead of the fleet's taints, for a node
// registered through the fleet's kubelet directly.
func nodeOptions(f *fleet, taints []corev1.Taint, label ...string) kubelet.NodeOptions {
	labels := map[string]string{framework.FleetLabel: f.Name(), framework.ForeignLabel: framework.ForeignLabelValue}
	if len(label) == 2 {
		labels[label[0]] = label[1]
	}
	return kubelet.NodeOptions{Labels: labels, Taints: taints}
}
