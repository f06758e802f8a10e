// Package report tells people what the agent did, where they already look:
// Events about the node (Events, with each reason's type, action and budget
// here) and the node's condition, kept in step with the latest round
// (ConditionWriter). budget.go times both against the pod's grace period.
package report

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/nodeready/nodeready/internal/wellknown"
)

// kind is how an Event of a reason is emitted. mustSend: the Event matters
// and has mustSendBudget (budget.go) to be written before the agent exits,
// or its loss is logged as an error; any other has flushBudget at exit.
type kind struct {
	eventType, action string
	mustSend          bool
}

var kinds = map[wellknown.Reason]kind{
	wellknown.Verified:             {corev1.EventTypeNormal, "Release", true},
	wellknown.FailedOpen:           {corev1.EventTypeWarning, "Release", true},
	wellknown.ReleaseFailed:        {corev1.EventTypeWarning, "Release", false},
	wellknown.CheckFailed:          {corev1.EventTypeWarning, "Verify", false},
	wellknown.VerificationFailed:   {corev1.EventTypeWarning, "Verify", true},
	wellknown.DNSNotChecked:        {corev1.EventTypeWarning, "Verify", false},
	wellknown.PodNetworkNotChecked: {corev1.EventTypeWarning, "Verify", false},
	wellknown.NotProven:            {corev1.EventTypeWarning, "Verify", false},
	wellknown.PeerUnreachable:      {corev1.EventTypeWarning, "Verify", false},
	wellknown.ReplacingNode:        {corev1.EventTypeWarning, "Replace", true},
	wellknown.ReplaceFailed:        {corev1.EventTypeWarning, "Replace", false},
	wellknown.SharedFault:          {corev1.EventTypeWarning, "Withhold", true},
	wellknown.Reverifying:          {corev1.EventTypeNormal, "Taint", false},
}

// matters reports whether an Event of the reason matters; the sink sees the
// reason as the Event's string.
func matters(reason string) bool { return kinds[wellknown.Reason(reason)].mustSend }
