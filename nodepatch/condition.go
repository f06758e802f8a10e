package nodepatch

import (
	"context"
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ConditionType is the Node condition nodeready owns. kube-state-metrics
// exports it as kube_node_status_condition{condition="node-ready/Verified"}.
const ConditionType corev1.NodeConditionType = "node-ready/Verified"

// Reasons of the condition.
const (
	ReasonVerified      = "Verified"      // every check passed; the node is released
	ReasonChecksFailed  = "ChecksFailed"  // retries or the initial timeout ran out; the node stays tainted
	ReasonFailedOpen    = "FailedOpen"    // released although checks fail (FAILURE_ACTION=fail-open)
	ReasonReplacing     = "Replacing"     // its NodeClaim or Node is being deleted (FAILURE_ACTION=replace-node)
	ReasonVerifying     = "Verifying"     // re-verification started; the node is tainted again
	ReasonMisconfigured = "Misconfigured" // the checks cannot pass or the release is refused because of the installation (RBAC, admission policy, settings), not the node
)

// MaxMessage bounds the condition message, in bytes. The API server sets no
// limit of its own on a Node condition's message (only the size of the
// request); this one keeps it readable in `kubectl describe node` and equal
// to the limit of an Event's note, which often carries the same text.
const MaxMessage = 1024

// Condition is the state the agent reports on its node.
type Condition struct {
	Status          corev1.ConditionStatus
	Reason, Message string
}

// SetCondition writes the condition to the node's status, unless the node
// already shows it (same status, reason and message). It patches only its
// own entry of status.conditions (a strategic merge on the condition type),
// so the kubelet's and other reporters' conditions are untouched and no lock
// is needed. It reads the node only when no read is at hand from Release.
// A message longer than MaxMessage is cut.
func (p *Patcher) SetCondition(ctx context.Context, c Condition) (bool, error) {
	c.Message = Truncate(c.Message, MaxMessage)
	node := p.last
	if node == nil {
		var err error
		if node, err = p.get(ctx); err != nil {
			return false, err
		}
	}
	now := metav1.NewTime(time.Now())
	transition := now
	for _, old := range node.Status.Conditions {
		if old.Type != ConditionType {
			continue
		}
		if old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message {
			return false, nil
		}
		if old.Status == c.Status {
			transition = old.LastTransitionTime
		}
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{{
		Type: ConditionType, Status: c.Status, Reason: c.Reason, Message: c.Message,
		LastHeartbeatTime: now, LastTransitionTime: transition,
	}}}})
	if err != nil {
		return false, err
	}
	updated, err := p.client.CoreV1().Nodes().Patch(ctx, p.node, types.StrategicMergePatchType, patch,
		metav1.PatchOptions{FieldManager: FieldManager}, "status")
	if err != nil {
		return false, p.classify("patch status of", err)
	}
	p.last = updated
	return true, nil
}
