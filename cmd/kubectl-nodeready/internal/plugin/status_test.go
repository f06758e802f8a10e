package plugin

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodeready/nodeready/internal/golden"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// TestStatus: every state, as a table, its wide form, JSON and YAML; each reads the nodes
// and the agent pods, so that a held node without an agent is told (TestHeldWithoutAgent).
func TestStatus(t *testing.T) {
	for _, tc := range []struct {
		name, golden string
		args         []string
		pods         bool // lists the agent pods
	}{
		{"default command", "status", nil, true},
		{"status", "status", []string{"status"}, true},
		{"wide", "status-wide", []string{"status", "-o", "wide"}, true},
		{"json", "status-json", []string{"status", "-o", "json"}, true},
		{"yaml", "status-yaml", []string{"-o", "yaml"}, true},
		{"selector", "status-selector", []string{"-l", "example.com/team=infra"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := newClient(fleet()...)
			r := run(t, client, tc.args...)
			require.NoError(t, r.err)
			assert.Empty(t, r.errOut)
			golden.Assert(t, tc.golden, r.out)

			var lists []string
			for _, a := range client.Actions() {
				assert.NotEqual(t, "patch", a.GetVerb(), "status writes nothing")
				if a.GetVerb() == "list" {
					lists = append(lists, a.GetResource().Resource)
				}
			}
			want := []string{"nodes"}
			if tc.pods {
				want = append(want, "pods")
			}
			assert.ElementsMatch(t, want, lists, "what status lists")
		})
	}
}

// TestStatusJSONIsStable: the machine-readable form reads back into its type, with the
// state, the times and the summary of each node.
func TestStatusJSONIsStable(t *testing.T) {
	r := run(t, newClient(fleet()...), "-o", "json")
	require.NoError(t, r.err)
	var s FleetStatus
	require.NoError(t, json.Unmarshal([]byte(r.out), &s))
	assert.Equal(t, "nodeready.io/v1alpha1", s.APIVersion)
	assert.Equal(t, "FleetStatus", s.Kind)
	got := map[string]State{}
	for _, n := range s.Nodes {
		got[n.Name] = n.State
	}
	assert.Equal(t, map[string]State{
		"a-held": Held, "b-new": Held, "c-misconfigured": Misconfigured, "d-reverifying": Reverifying,
		"e-reverifying-untainted": Reverifying, "f-verified": Verified, "g-failed-open": FailedOpen,
		"h-hand-released": HandReleased, "i-not-managed": NotManaged, "j-stranded": Held,
	}, got)
	assert.Equal(t, 10, s.Summary.Nodes)
	require.NotNil(t, s.Summary.LongestHold)
	// j-stranded has been tainted since its creation, 6h ago, though labelled.
	assert.Equal(t, "j-stranded", s.Summary.LongestHold.Node)
	assert.True(t, now.Add(-6*time.Hour).Equal(s.Summary.LongestHold.Since.Time), "since %s", s.Summary.LongestHold.Since)
}

// TestStatusTemplate: a Go template or a JSONPath of the FleetStatus, with -o or, as kubectl
// takes it, --template alone.
func TestStatusTemplate(t *testing.T) {
	for _, args := range [][]string{
		{"--template", `{{range .nodes}}{{.name}}={{.state}} {{end}}`},
		{"status", "-o", "go-template", "--template", `{{range .nodes}}{{.name}}={{.state}} {{end}}`},
		{"-o", `jsonpath={range .nodes[*]}{.name}={.state} {end}`},
	} {
		r := run(t, newClient(fleet()...), args...)
		require.NoError(t, r.err, "%v", args)
		assert.Equal(t, "a-held=held b-new=held c-misconfigured=misconfigured d-reverifying=re-verifying "+
			"e-reverifying-untainted=re-verifying f-verified=verified g-failed-open=failed-open "+
			"h-hand-released=hand-released i-not-managed=not-managed j-stranded=held ", r.out, "%v", args)
	}
}

// TestStates: where a node stands, and since when, from its marks alone.
func TestStates(t *testing.T) {
	k, err := keysFrom(nil)
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		node  *corev1.Node
		want  State
		since *metav1.Time
	}{
		{"new node, tainted, no verdict yet", node("n", nodeOpts{created: time.Minute, startup: true}), Held, ptr(ago(time.Minute))},
		{"held with failing checks, since it was created",
			node("n", nodeOpts{created: time.Hour, startup: true, cond: cond(corev1.ConditionFalse, wellknown.ChecksFailed, time.Minute, "")}), Held, ptr(ago(time.Hour))},
		{"a startup taint of another value holds it too",
			withTaints(node("n", nodeOpts{created: time.Hour}), corev1.Taint{Key: wellknown.TaintKey, Value: "other", Effect: corev1.TaintEffectNoSchedule}), Held, ptr(ago(time.Hour))},
		{"the startup taint's key with another effect is not nodeready's",
			withTaints(node("n", nodeOpts{created: time.Hour}), corev1.Taint{Key: wellknown.TaintKey, Value: "true", Effect: corev1.TaintEffectPreferNoSchedule}), NotManaged, nil},
		{"misconfigured", node("n", nodeOpts{created: time.Hour, startup: true, cond: cond(corev1.ConditionFalse, wellknown.Misconfigured, time.Minute, "")}), Misconfigured, ptr(ago(time.Hour))},
		{"re-verifying with the taint back, since the condition turned False",
			node("n", nodeOpts{created: 9 * time.Hour, startup: true, annotations: verifiedAt(8*time.Hour, "1s"), cond: cond(corev1.ConditionFalse, wellknown.Verifying, time.Minute, "")}), Reverifying, ptr(ago(time.Minute))},
		{"re-verifying, misconfigured", node("n", nodeOpts{created: 9 * time.Hour, startup: true, annotations: verifiedAt(8*time.Hour, "1s"), cond: cond(corev1.ConditionFalse, wellknown.Misconfigured, time.Minute, "")}), Misconfigured, ptr(ago(time.Minute))},
		{"re-verifying without the taint: no time told", node("n", nodeOpts{created: 9 * time.Hour, annotations: verifiedAt(8*time.Hour, "1s"), cond: cond(corev1.ConditionTrue, wellknown.Verified, 8*time.Hour, "")}), Reverifying, nil},
		{"verified, since the release", node("n", nodeOpts{created: 9 * time.Hour, label: "true", annotations: verifiedAt(8*time.Hour, "1s")}), Verified, ptr(ago(8 * time.Hour))},
		{"verified before the annotations existed: since the condition", node("n", nodeOpts{created: 9 * time.Hour, label: "true", cond: cond(corev1.ConditionTrue, wellknown.Verified, 7*time.Hour, "")}), Verified, ptr(ago(7 * time.Hour))},
		{"failed open", node("n", nodeOpts{created: 9 * time.Hour, label: wellknown.FailedOpenValue, annotations: verifiedAt(8*time.Hour, "30m")}), FailedOpen, ptr(ago(8 * time.Hour))},
		{"released by hand", node("n", nodeOpts{created: 9 * time.Hour, label: "true", annotations: releasedBy("bob", time.Hour)}), HandReleased, ptr(ago(time.Hour))},
		{"released by hand, verified since: verified",
			node("n", nodeOpts{created: 9 * time.Hour, label: "true", annotations: merge(releasedBy("bob", 2*time.Hour), verifiedAt(time.Hour, "1s"))}), Verified, ptr(ago(time.Hour))},
		{"another label value keeps the agent away, unverified", node("n", nodeOpts{created: 9 * time.Hour, label: "maybe"}), HandReleased, nil},
		{"labelled and tainted: held, with no agent", node("n", nodeOpts{created: 9 * time.Hour, startup: true, label: "true"}), Held, ptr(ago(9 * time.Hour))},
		{"no marks at all", node("n", nodeOpts{created: 9 * time.Hour}), NotManaged, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := judge(k, tc.node)
			assert.Equal(t, tc.want, j.state)
			assert.Equal(t, tc.since, j.since)
		})
	}
}

func ptr[T any](v T) *T { return &v }

func withTaints(n *corev1.Node, taints ...corev1.Taint) *corev1.Node {
	n.Spec.Taints = append(n.Spec.Taints, taints...)
	return n
}

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// TestRenamedKeys: the startup taint and the label are read from the installed ConfigMap
// (a kustomize keys overlay, Helm values), EXTRA_TAINTS included, and the flags override it.
func TestRenamedKeys(t *testing.T) {
	renamed := func(name string, taints []corev1.Taint, labels map[string]string) *corev1.Node {
		n := node(name, nodeOpts{created: time.Hour})
		n.Spec.Taints = taints
		for k, v := range labels {
			n.Labels[k] = v
		}
		return n
	}
	objs := []runtime.Object{
		configMap(map[string]string{"TAINT_KEY": "example.com/unverified", "TAINT_EFFECT": "NoExecute",
			"EXTRA_TAINTS": "startup-taint.cluster-autoscaler.kubernetes.io/ready=false:NoSchedule", "VERIFIED_LABEL": "example.com/ready", "VERIFIED_LABEL_VALUE": "yes"}),
		renamed("held-by-key", []corev1.Taint{{Key: "example.com/unverified", Effect: corev1.TaintEffectNoExecute}}, nil),
		renamed("held-by-extra", []corev1.Taint{{Key: "startup-taint.cluster-autoscaler.kubernetes.io/ready", Value: "false", Effect: corev1.TaintEffectNoSchedule}}, nil),
		renamed("default-keys-only", []corev1.Taint{wellknown.StartupTaint()}, map[string]string{wellknown.VerifiedLabel: "true"}),
		renamed("verified", nil, map[string]string{"example.com/ready": "yes"}),
	}
	r := run(t, newClient(objs...))
	require.NoError(t, r.err)
	golden.Assert(t, "status-renamed", r.out)

	r = run(t, newClient(objs...), "--taint-key", wellknown.TaintKey, "--label", wellknown.VerifiedLabel, "-o", "jsonpath={range .nodes[*]}{.name}={.state}{\"\\n\"}{end}")
	require.NoError(t, r.err)
	// --taint-key keeps the ConfigMap's effect: NoExecute is not the default taint's.
	assert.Equal(t, "default-keys-only=hand-released\nheld-by-extra=held\nheld-by-key=not-managed\nverified=not-managed\n", r.out)
}

// TestNoConfigMap: where the ConfigMap cannot be read, nodeready's defaults, with a warning
// that says what to pass; a ConfigMap whose keys the agent refuses is an error.
func TestNoConfigMap(t *testing.T) {
	r := run(t, newClient(node("n", nodeOpts{created: time.Hour, startup: true})))
	require.NoError(t, r.err)
	assert.Contains(t, r.out, "1 node: 1 held; longest hold: n, 60m")
	assert.Equal(t, "Warning: could not read kube-system/nodeready-config (not found): judging nodes by nodeready's defaults; pass --namespace and --name (or --config-map) where nodeready is installed, or --taint-key and --label\n", r.errOut)

	r = run(t, newClient(configMap(map[string]string{"EXTRA_TAINTS": "bad taint"})))
	require.EqualError(t, r.err, `ConfigMap kube-system/nodeready-config: EXTRA_TAINTS "bad taint": write key[=value]:effect, such as readiness.k8s.io/nodeready=true:NoSchedule`)
	r = run(t, newClient(configMap(map[string]string{"TAINT_EFFECT": "NoWay"})))
	require.EqualError(t, r.err, `ConfigMap kube-system/nodeready-config: invalid configuration: TAINT_EFFECT="NoWay": use one of NoSchedule, PreferNoSchedule, NoExecute`)
	r = run(t, newClient(), "-n", "nodeready", "--config-map", "other")
	require.NoError(t, r.err)
	assert.Contains(t, r.errOut, "could not read nodeready/other (not found)")
	assert.Equal(t, "No nodes found.\n", r.out)
}

// TestHeldWithoutAgent: a node that carries the startup taint and no verified label, with no
// agent pod bound to it, is told in its row (noAgent, and what may keep the agent away: its
// other NoSchedule taints, not being Ready) and in the summary, in the table and in JSON. A
// held node with an agent pod, Pending too, and a labelled node still tainted (no agent is
// due there) are not.
func TestHeldWithoutAgent(t *testing.T) {
	gpu := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	notReady := node("c-not-ready", nodeOpts{created: 3 * time.Minute, startup: true})
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	objs := []runtime.Object{
		configMap(map[string]string{"TAINT_KEY": "node-ready/unverified", "TAINT_EFFECT": "NoSchedule", "VERIFIED_LABEL": "node-ready/verified", "VERIFIED_LABEL_VALUE": "true"}),
		node("a-gpu", nodeOpts{created: 8 * time.Minute, startup: true, taints: []corev1.Taint{gpu}}),
		node("b-with-agent", nodeOpts{created: 20 * time.Second, startup: true, taints: []corev1.Taint{gpu}}),
		notReady,
		node("d-stranded", nodeOpts{created: time.Hour, startup: true, label: "true"}),
		agent("nodeready-b1", "b-with-agent", corev1.PodPending, 0),
	}
	r := run(t, newClient(objs...), "status")
	require.NoError(t, r.err)
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	require.Len(t, lines, 6, r.out)
	assert.Contains(t, lines[1], "no agent pod here; other taints: dedicated=gpu:NoSchedule", "a-gpu")
	assert.NotContains(t, lines[2], "no agent", "b-with-agent")
	assert.Contains(t, lines[3], "no agent pod here (not Ready)", "c-not-ready")
	assert.NotContains(t, lines[4], "no agent", "d-stranded")
	assert.True(t, strings.HasSuffix(lines[5], "; held without an agent: a-gpu, c-not-ready"), lines[5])

	r = run(t, newClient(objs...), "status", "-o", "json")
	require.NoError(t, r.err)
	var s FleetStatus
	require.NoError(t, json.Unmarshal([]byte(r.out), &s))
	noAgent := map[string]bool{}
	for _, n := range s.Nodes {
		noAgent[n.Name] = n.NoAgent
	}
	assert.Equal(t, map[string]bool{"a-gpu": true, "b-with-agent": false, "c-not-ready": true, "d-stranded": false}, noAgent)
	assert.Equal(t, []string{"a-gpu", "c-not-ready"}, s.Summary.HeldWithoutAgent)
	assert.Equal(t, "no agent pod here; other taints: dedicated=gpu:NoSchedule", s.Nodes[0].Message)
}
