package nodepatch

import (
	"context"
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeready/nodeready/internal/wellknown"
)

// SetCondition writes the condition to the node's status, unless the node
// already shows it (same status, reason and message). It patches only its
// own entry of status.conditions (a strategic merge on the condition type),
// so the kubelet's and other reporters' conditions are untouched and no lock
// is needed. It reads the node only when no read is at hand from Release.
// A message longer than wellknown.MaxMessage is cut.
//
// While a release's write that got no answer may still land, a condition that
// says the node is not released is written as Withdraw writes it, fenced by the
// node's resourceVersion: when the node shows the release landed, nothing is
// written and the error is ErrReleased, so the node is never labelled with a
// condition that says otherwise.
func (p *Patcher) SetCondition(ctx context.Context, c wellknown.Condition) (bool, error) {
	c.Message = wellknown.Truncate(c.Message, wellknown.MaxMessage)
	if c.Status != corev1.ConditionTrue && p.outstanding.Load() {
		released, err := p.Withdraw(ctx, c)
		switch {
		case err != nil:
			return false, err
		case released:
			return false, ErrReleased
		}
		return true, nil
	}
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
		if old.Type != wellknown.ConditionType {
			continue
		}
		if old.Status == c.Status && old.Reason == string(c.Reason) && old.Message == c.Message {
			return false, nil
		}
		if old.Status == c.Status {
			transition = old.LastTransitionTime
		}
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{{
		Type: wellknown.ConditionType, Status: c.Status, Reason: string(c.Reason), Message: c.Message,
		LastHeartbeatTime: now, LastTransitionTime: transition,
	}}}})
	if err != nil {
		return false, err
	}
	updated, err := p.client.CoreV1().Nodes().Patch(ctx, p.node, types.StrategicMergePatchType, patch,
		metav1.PatchOptions{FieldManager: wellknown.FieldManager}, "status")
	if err != nil {
		return false, p.classify("patch status of", err)
	}
	p.wrote(updated)
	return true, nil
}
