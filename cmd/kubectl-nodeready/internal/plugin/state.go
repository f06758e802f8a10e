package plugin

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeready/nodeready/internal/wellknown"
)

// State is where a node stands with nodeready, as its taints, label, annotations and
// condition tell.
type State string

// The states, in the order the summary counts them.
const (
	// Held: the node carries a startup taint; its agent checks it.
	Held State = "held"
	// Misconfigured: held, and the agent says the cluster or the configuration stands in the
	// way, not the node (condition reason Misconfigured).
	Misconfigured State = "misconfigured"
	// Reverifying: nodeready verified the node before and its label is gone: an agent checks
	// it again, with the startup taint back when REVERIFY_TAINT is true.
	Reverifying State = "re-verifying"
	// Verified: the verified label with VERIFIED_LABEL_VALUE, no startup taint.
	Verified State = "verified"
	// FailedOpen: released with failing checks (FAILURE_ACTION=fail-open).
	FailedOpen State = "failed-open"
	// HandReleased: released by a person with `kubectl nodeready release`, unverified.
	HandReleased State = "hand-released"
	// NotManaged: no startup taint, no label and no record of nodeready's: a node that
	// predates the install (its agent labels it once its checks pass), or one nodeready
	// does not serve.
	NotManaged State = "not-managed"
)

// states lists the states in the summary's order.
var states = []State{Held, Misconfigured, Reverifying, Verified, FailedOpen, HandReleased, NotManaged}

// holding reports whether a node in the state carries a startup taint for nodeready.
func (s State) holding() bool { return s == Held || s == Misconfigured || s == Reverifying }

// judgement is what the plugin reads on one node.
type judgement struct {
	state State
	// since is when the node entered the state, when the node tells it.
	since *metav1.Time
	// cond is nodeready's condition, nil when the node has none.
	cond *corev1.NodeCondition
	// note adds to the condition's message what the node's marks say.
	note string
	// taints are the startup taints the node carries.
	taints []string
	// label is the verified label's value; labelled tells an empty value from none.
	label    string
	labelled bool
	// verifiedAt and duration are the agent's completion record.
	verifiedAt *metav1.Time
	duration   string
	// releasedBy and releasedAt are a release by hand's record.
	releasedBy string
	releasedAt *metav1.Time
}

// judge tells where node stands.
func judge(k Keys, node *corev1.Node) judgement {
	j := judgement{taints: k.startupTaints(node)}
	j.label, j.labelled = node.Labels[k.Label]
	j.verifiedAt = annotationTime(node, wellknown.ReleasedAtAnnotation(k.Label))
	j.duration = node.Annotations[wellknown.DurationAnnotation(k.Label)]
	j.releasedBy = node.Annotations[wellknown.ReleasedByAnnotation(k.Label)]
	j.releasedAt = annotationTime(node, wellknown.ReleasedByTimeAnnotation(k.Label))
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == wellknown.ConditionType {
			j.cond = &node.Status.Conditions[i]
		}
	}
	tainted := len(j.taints) > 0
	reason := ""
	var changed *metav1.Time // when the condition last changed status
	if j.cond != nil {
		reason = j.cond.Reason
		if !j.cond.LastTransitionTime.IsZero() {
			changed = &j.cond.LastTransitionTime
		}
	}
	created := node.CreationTimestamp.DeepCopy()
	// A hold begins when the node is created, or, on a node nodeready released before, when
	// its condition turned False again for the re-verification.
	holdSince := created
	if j.verifiedAt != nil && changed != nil && j.cond.Status != corev1.ConditionTrue {
		holdSince = changed
	}

	switch {
	case tainted && j.labelled:
		// No agent runs here (the label keeps the DaemonSet away), so nothing of nodeready's
		// removes this taint.
		j.state, j.since = Held, holdSince
		j.note = fmt.Sprintf("labelled %s=%s but still tainted: no agent runs here; the taint's owner removes it (TAINT_OWNER=external), else kubectl nodeready release", k.Label, j.label)
	case tainted && reason == string(wellknown.Misconfigured):
		j.state, j.since = Misconfigured, holdSince
	case tainted && (j.verifiedAt != nil || reason == string(wellknown.Verifying)):
		j.state, j.since = Reverifying, holdSince
	case tainted:
		j.state, j.since = Held, holdSince
	case j.labelled && j.label == wellknown.FailedOpenValue:
		j.state, j.since = FailedOpen, firstOf(j.verifiedAt, changed)
	case j.labelled && j.releasedAt != nil && (j.verifiedAt == nil || j.verifiedAt.Before(j.releasedAt)):
		j.state, j.since = HandReleased, j.releasedAt
		j.note = "released by hand by " + orUnknown(j.releasedBy) + ", unverified"
	case j.labelled && j.label == k.LabelValue:
		j.state, j.since = Verified, firstOf(j.verifiedAt, changed)
	case j.labelled:
		// Any value keeps the agent away (its node affinity is DoesNotExist), but only
		// VERIFIED_LABEL_VALUE says the node was verified under this configuration.
		j.state, j.since = HandReleased, firstOf(j.releasedAt, j.verifiedAt)
		j.note = fmt.Sprintf("labelled %s=%s, not %s: released, not verified under this configuration", k.Label, j.label, k.LabelValue)
	case j.verifiedAt != nil:
		// The label was removed: a re-verification without REVERIFY_TAINT, or before the
		// agent has put the taint back. The node tells no time for the removal itself.
		j.state = Reverifying
		j.note = "label removed: an agent checks the node again, without the startup taint"
		if j.cond != nil && j.cond.Status != corev1.ConditionTrue {
			j.since = changed
		} else if j.cond != nil {
			j.note += "; the condition is the last verification's"
		}
	default:
		j.state = NotManaged
	}
	return j
}

// firstOf returns the first time that is set.
func firstOf(times ...*metav1.Time) *metav1.Time {
	for _, t := range times {
		if t != nil {
			return t
		}
	}
	return nil
}

// annotationTime reads an RFC 3339 time from the node's annotation, nil when absent or
// unreadable.
func annotationTime(node *corev1.Node, key string) *metav1.Time {
	v, ok := node.Annotations[key]
	if !ok {
		return nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return nil
	}
	mt := metav1.NewTime(t)
	return &mt
}

func orUnknown(s string) string {
	if s == "" {
		return "an unknown user"
	}
	return s
}
