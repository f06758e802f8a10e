package plugin

import (
	"bytes"
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodeready/nodeready/internal/kube"
	"github.com/nodeready/nodeready/internal/kube/adapt"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// now is the tests' clock: every age in the golden files is counted to it.
var now = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// ago is a time d before now.
func ago(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

func agoString(d time.Duration) string { return now.Add(-d).Format(time.RFC3339) }

// result is what one run of the plugin printed.
type result struct {
	out, errOut string
	err         error
}

// run runs the plugin with args against client, as the user alice.
func run(t *testing.T, client *fake.Clientset, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	o := &Options{
		streams:     genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut},
		configFlags: newKubeconfigFlags(),
		now:         func() time.Time { return now },
		newClient:   func() (Client, error) { return asClient(client), nil },
		whoAmI:      func(context.Context, Client) string { return "alice@example.com" },
	}
	cmd := o.command("test")
	cmd.SetArgs(append([]string{}, args...)) // nil would be os.Args
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	err := cmd.ExecuteContext(t.Context())
	return result{out: out.String(), errOut: errOut.String(), err: err}
}

// nodeOpts describes a fixture node.
type nodeOpts struct {
	created     time.Duration  // ago
	startup     bool           // carries the default startup taint
	foreign     bool           // carries another owner's taint and label
	taints      []corev1.Taint // more taints
	label       string         // the verified label's value, "" for none
	annotations map[string]string
	cond        *corev1.NodeCondition
}

// node returns a fixture node.
func node(name string, o nodeOpts) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:              name,
		UID:               types.UID("uid-" + name),
		CreationTimestamp: ago(o.created),
		ResourceVersion:   "1",
		Labels:            map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"},
		Annotations:       o.annotations,
	}}
	if o.startup {
		n.Spec.Taints = append(n.Spec.Taints, wellknown.StartupTaint())
	}
	if o.foreign {
		n.Labels["example.com/team"] = "infra"
		n.Spec.Taints = append([]corev1.Taint{{Key: "example.com/dedicated", Value: "infra", Effect: corev1.TaintEffectPreferNoSchedule}}, n.Spec.Taints...)
	}
	n.Spec.Taints = append(n.Spec.Taints, o.taints...)
	if o.label != "" {
		n.Labels[wellknown.VerifiedLabel] = o.label
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}
	if o.cond != nil {
		n.Status.Conditions = append(n.Status.Conditions, *o.cond)
	}
	return n
}

// cond returns nodeready's condition.
func cond(status corev1.ConditionStatus, reason wellknown.Reason, since time.Duration, message string) *corev1.NodeCondition {
	return &corev1.NodeCondition{Type: wellknown.ConditionType, Status: status, Reason: string(reason), Message: message,
		LastTransitionTime: ago(since), LastHeartbeatTime: ago(since)}
}

// agent returns an agent pod on node.
func agent(name, node string, phase corev1.PodPhase, restarts int32) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: DefaultNamespace, Labels: map[string]string{"app.kubernetes.io/name": "nodeready"}},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{Name: "nodeready", RestartCount: restarts}}},
	}
}

// configMap returns nodeready's ConfigMap with data.
func configMap(data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: DefaultConfigMap, Namespace: DefaultNamespace}, Data: data}
}

// The completion record of a release by the agent, and of one by hand.
func verifiedAt(d time.Duration, took string) map[string]string {
	return map[string]string{wellknown.ReleasedAtAnnotation(wellknown.VerifiedLabel): agoString(d), wellknown.DurationAnnotation(wellknown.VerifiedLabel): took}
}

func releasedBy(user string, d time.Duration) map[string]string {
	return map[string]string{wellknown.ReleasedByAnnotation(wellknown.VerifiedLabel): user, wellknown.ReleasedByTimeAnnotation(wellknown.VerifiedLabel): agoString(d)}
}

// fleet is a node in every state, the agent pods of those that run one, and nodeready's
// ConfigMap as manifests/ installs it.
func fleet() []runtime.Object {
	return []runtime.Object{
		configMap(map[string]string{"TAINT_KEY": "node-ready/unverified", "TAINT_EFFECT": "NoSchedule", "VERIFIED_LABEL": "node-ready/verified", "VERIFIED_LABEL_VALUE": "true", "REVERIFY_TAINT": "true"}),
		node("a-held", nodeOpts{created: 12 * time.Minute, startup: true, foreign: true,
			cond: cond(corev1.ConditionFalse, wellknown.ChecksFailed, 7*time.Minute,
				`dns kubernetes.default.svc.cluster.local: resolve "kubernetes.default.svc.cluster.local": lookup kubernetes.default.svc.cluster.local on 10.96.0.10:53: no such host`)}),
		node("b-new", nodeOpts{created: 20 * time.Second, startup: true}),
		node("c-misconfigured", nodeOpts{created: 40 * time.Minute, startup: true,
			cond: cond(corev1.ConditionFalse, wellknown.Misconfigured, 39*time.Minute,
				`daemonsets kube-system/cilium: daemonset kube-system/cilium: not found`)}),
		node("d-reverifying", nodeOpts{created: 50 * time.Hour, startup: true, annotations: verifiedAt(49*time.Hour, "3.1s"),
			cond: cond(corev1.ConditionFalse, wellknown.Verifying, 2*time.Minute, "Verifying the node again")}),
		node("e-reverifying-untainted", nodeOpts{created: 30 * time.Hour, annotations: verifiedAt(29*time.Hour, "2.2s"),
			cond: cond(corev1.ConditionTrue, wellknown.Verified, 29*time.Hour, "All 4 checks passed")}),
		node("f-verified", nodeOpts{created: 3 * time.Hour, foreign: true, label: "true", annotations: verifiedAt(3*time.Hour-5*time.Second, "2.4s"),
			cond: cond(corev1.ConditionTrue, wellknown.Verified, 3*time.Hour-5*time.Second, "All 4 checks passed")}),
		node("g-failed-open", nodeOpts{created: 2 * time.Hour, label: wellknown.FailedOpenValue, annotations: verifiedAt(90*time.Minute, "30m0.5s"),
			cond: cond(corev1.ConditionFalse, wellknown.FailedOpen, 90*time.Minute, "Released after 30m0s with failing checks: tcp 10.96.0.1:443: dial tcp 10.96.0.1:443: i/o timeout")}),
		node("h-hand-released", nodeOpts{created: 25 * time.Minute, label: "true", annotations: releasedBy("bob@example.com", 5*time.Minute),
			cond: cond(corev1.ConditionFalse, wellknown.ChecksFailed, 20*time.Minute, "endpoints default/kubernetes: no ready endpoint in its EndpointSlices")}),
		node("i-not-managed", nodeOpts{created: 400 * 24 * time.Hour}),
		node("j-stranded", nodeOpts{created: 6 * time.Hour, startup: true, label: "true", annotations: verifiedAt(6*time.Hour-3*time.Second, "2.9s"),
			cond: cond(corev1.ConditionTrue, wellknown.Verified, 6*time.Hour-3*time.Second, "All 4 checks passed")}),
		agent("nodeready-a1b2c", "a-held", corev1.PodRunning, 0),
		agent("nodeready-d3e4f", "b-new", corev1.PodPending, 0),
		agent("nodeready-g5h6i", "c-misconfigured", corev1.PodRunning, 2),
		agent("nodeready-j7k8l", "d-reverifying", corev1.PodRunning, 0),
		agent("nodeready-m9n0p", "e-reverifying-untainted", corev1.PodRunning, 0),
	}
}

// newClient is a fake clientset holding objs.
func newClient(objs ...runtime.Object) *fake.Clientset {
	return fake.NewClientset(objs...)
}

// fakeClient is the plugin's Client over a fake clientset, its reactors included.
type fakeClient struct {
	kube.Interface
	cs *fake.Clientset
}

func asClient(cs *fake.Clientset) Client { return fakeClient{adapt.Clientset(cs), cs} }

func (c fakeClient) AuthenticationV1() AuthenticationV1 { return fakeAuthn{c.cs} }

type fakeAuthn struct{ cs *fake.Clientset }

func (a fakeAuthn) SelfSubjectReviews() SelfSubjectReviews {
	return a.cs.AuthenticationV1().SelfSubjectReviews()
}
