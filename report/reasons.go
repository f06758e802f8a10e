// Package report tells people what the agent did, where they already look:
// Events about the node (Events, with each reason's type, action and budget
// here) and the node's condition, kept in step with the latest round
// (ConditionWriter). budget.go times both against the pod's grace period.
package report

import corev1 "k8s.io/api/core/v1"

// Reason is the reason of an Event about the node: `kubectl describe node`
// shows it, and alerts and e2e tests match on it.
type Reason string

// The reasons of nodeready's Events; kinds below gives each one's type,
// action and budget.
const (
	Verified             Reason = "Verified"             // released: every check passed
	FailedOpen           Reason = "FailedOpen"           // released with failing checks (FAILURE_ACTION=fail-open)
	ReleaseFailed        Reason = "ReleaseFailed"        // checks passed, the release was refused: a misconfiguration
	CheckFailed          Reason = "CheckFailed"          // one per failing check and error
	VerificationFailed   Reason = "VerificationFailed"   // retries or the initial timeout ran out; names the failure action
	DNSNotChecked        Reason = "DNSNotChecked"        // released without the dns check: no cluster DNS runs anywhere
	PodNetworkNotChecked Reason = "PodNetworkNotChecked" // released without the podnetwork check: no pod elsewhere
	ReplacingNode        Reason = "ReplacingNode"        // the node's NodeClaim or Node was deleted
	ReplaceFailed        Reason = "ReplaceFailed"        // replace-node did not delete the node
	Reverifying          Reason = "Reverifying"          // the startup taint put back for a re-verification
)

// kind is how an Event of a reason is emitted. mustSend: the Event matters
// and has mustSendBudget (budget.go) to be written before the agent exits,
// or its loss is logged as an error; any other has flushBudget at exit.
type kind struct {
	eventType, action string
	mustSend          bool
}

var kinds = map[Reason]kind{
	Verified:             {corev1.EventTypeNormal, "Release", true},
	FailedOpen:           {corev1.EventTypeWarning, "Release", true},
	ReleaseFailed:        {corev1.EventTypeWarning, "Release", false},
	CheckFailed:          {corev1.EventTypeWarning, "Verify", false},
	VerificationFailed:   {corev1.EventTypeWarning, "Verify", true},
	DNSNotChecked:        {corev1.EventTypeWarning, "Verify", false},
	PodNetworkNotChecked: {corev1.EventTypeWarning, "Verify", false},
	ReplacingNode:        {corev1.EventTypeWarning, "Replace", true},
	ReplaceFailed:        {corev1.EventTypeWarning, "Replace", false},
	Reverifying:          {corev1.EventTypeNormal, "Taint", false},
}

// matters reports whether an Event of the reason matters; the sink sees the
// reason as the Event's string.
func matters(reason string) bool { return kinds[Reason(reason)].mustSend }
