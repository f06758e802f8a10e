package nodepatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeready/nodeready/internal/wellknown"
)

// statusLead is how long the release's write of the node waits after its condition's write
// was sent. Both are in flight at once, so the release takes one round trip, not two; the
// wait gives the API server time to store the condition before it applies the write that
// tests for it. On the e2e control plane (e2e/suites/reliability TestReleaseTestsItsCondition)
// the condition is stored within 1-5 ms; a write that comes too early is refused and sent
// again once the condition's answer is in, as two round trips.
const statusLead = 10 * time.Millisecond

// ReleaseWith releases the node as Release does (as FailOpen does when c's reason is
// FailedOpen), with c as its condition, so that no reader of the node ever sees the label
// with a condition that says otherwise. The condition goes to nodes/status and the label,
// taint and annotations to the node, both sent at once; the node's write carries a JSON
// Patch test of the condition, so the API server applies it only once the condition is
// stored (the node's strategy resets the status of a write to the node only after the patch
// is applied: the test sees the status as stored). A node that already shows c gets the
// node's write alone. When the release fails the condition may stay True on a held node:
// Withdraw says otherwise. Every error is Release's.
func (p *Patcher) ReleaseWith(ctx context.Context, c wellknown.Condition, annotations map[string]string) (Outcome, error) {
	value := p.spec.LabelValue
	if c.Reason == wellknown.FailedOpen {
		value = wellknown.FailedOpenValue
	}
	c.Message = wellknown.Truncate(c.Message, wellknown.MaxMessage)
	return p.release(ctx, value, &c, annotations)
}

// release writes the label with value, the startup taint's removal and annotations to the
// node, and, when c is not nil, c to nodes/status at once, the node's write testing it
// (ReleaseWith). Release, FailOpen and Settle write the node alone.
func (p *Patcher) release(ctx context.Context, value string, c *wellknown.Condition, annotations map[string]string) (Outcome, error) {
	p.value = value
	outcome := Unchanged
	read := p.latest
	var tested []corev1.Taint // the taints the last write's lock tested, when it was lost
	err := p.retry(ctx, func() error {
		node, err := read(ctx)
		read = p.get // a retry follows a lost lock: the watch may not show the newer node yet
		if err != nil {
			return err
		}
		if !registered(node) {
			return ErrNotRegistered
		}
		patch := p.plan(node, value, annotations)
		if patch == nil {
			p.confirmedRV = node.ResourceVersion
			p.outstanding.Store(false)
			return nil
		}
		if tested != nil && equality.Semantic.DeepEqual(tested, node.Spec.Taints) {
			// The lock was lost although the taints read are the ones tested: the server's
			// taints carry a field these API types do not know (a newer Kubernetes). Test and
			// keep the list as the server sends it, unknown fields and all.
			if patch, err = p.rawPlan(ctx, value, annotations); err != nil {
				return err
			}
		}
		var status <-chan statusAnswer
		if c != nil {
			at, shows := conditionAt(node, *c)
			if !shows {
				var ops []operation
				ops, at = conditionOps(node, *c)
				status = p.patchStatus(ctx, ops)
				if node.Labels == nil || (node.Annotations == nil && len(annotations) > 0) {
					// The node's write would create a map, guarded by a test of the
					// resourceVersion, which the condition's write changes: it waits for that
					// write's answer.
					s := <-status
					if s.err != nil {
						return p.statusError(s.err)
					}
					p.wrote(s.node)
					read = func(context.Context) (*corev1.Node, error) { return s.node, nil }
					return errConditionWritten
				}
				select {
				case <-ctx.Done():
				case <-time.After(statusLead):
				}
			}
			patch = testsCondition(patch, at, *c)
		}
		tested = slices.Clone(node.Spec.Taints)
		written, err := p.client.CoreV1().Nodes().Patch(ctx, p.node, types.JSONPatchType, patch,
			metav1.PatchOptions{FieldManager: wellknown.FieldManager})
		if !apierrors.IsInvalid(err) {
			tested = nil
		}
		if status != nil {
			// Wait for the condition's answer: the node it answers is the freshest to plan a
			// retry from, and its error is why the release failed when the node's write was
			// refused for want of the condition. A refusal then says nothing of the taints.
			tested = nil
			s := <-status
			switch {
			case s.err != nil && unanswered(s.err) && (err == nil || apierrors.IsInvalid(err)):
				if err == nil {
					break // the node's write tested the condition: it was stored
				}
				return p.statusError(s.err)
			case s.err != nil && err != nil && apierrors.IsInvalid(err) && !apierrors.IsInvalid(s.err):
				return p.statusError(s.err)
			case s.err == nil:
				p.wrote(s.node)
				if err != nil {
					read = func(context.Context) (*corev1.Node, error) { return s.node, nil }
				}
			}
		}
		if err != nil {
			if unanswered(err) {
				p.outstanding.Store(true)
				return fmt.Errorf("patch node %s: %w: %w", p.node, ErrUnknownOutcome, err)
			}
			return p.classify("patch", err)
		}
		outcome = Patched
		p.wrote(written)
		if !p.Verified(written) {
			return ErrNotConfirmed
		}
		p.confirmedRV = written.ResourceVersion
		p.outstanding.Store(false)
		return nil
	})
	return outcome, err
}

// Withdraw writes c in place of the condition a release that failed may have left on the
// node (True, on a node that stays held). It reads the node first: a node that is released
// after all (a write that got no answer landed) gets no write, and Withdraw reports true.
// Otherwise c is written with a test of the resourceVersion read, so a late write of the
// release cannot slip in between: it landed before the read (and the node is released) or
// it comes after c, and its own test of the condition refuses it. A node that shows c
// already gets no write.
func (p *Patcher) Withdraw(ctx context.Context, c wellknown.Condition) (released bool, err error) {
	c.Message = wellknown.Truncate(c.Message, wellknown.MaxMessage)
	err = p.retry(ctx, func() error {
		node, err := p.get(ctx)
		if err != nil {
			return err
		}
		if released = p.Verified(node); released {
			// The fence stays: a condition saying otherwise, still pending with its writer,
			// must never land on the released node. The release's own path lifts it.
			p.confirmedRV = node.ResourceVersion
			return nil
		}
		// Once the node shows c, a release's write still on its way is refused by its own
		// test of the condition: nothing is outstanding any more.
		if _, shows := conditionAt(node, c); shows {
			p.outstanding.Store(false)
			return nil
		}
		ops, _ := conditionOps(node, c)
		ops = fenced(node, ops...)
		s := <-p.patchStatus(ctx, ops)
		if s.err != nil {
			return p.classify("patch status of", s.err)
		}
		p.wrote(s.node)
		p.outstanding.Store(false)
		return nil
	})
	return released, err
}

// errConditionWritten: the release's condition was written on its own, and the node's
// write is planned again from the node it answered. Retried at once.
var errConditionWritten = apierrors.NewConflict(corev1.Resource("nodes"), "", errors.New("the condition was written first"))

// statusError is the error of a release whose condition could not be written: it may have
// been stored when no answer came.
func (p *Patcher) statusError(err error) error {
	if unanswered(err) {
		return fmt.Errorf("patch status of node %s: %w: %w", p.node, ErrUnknownOutcome, err)
	}
	return p.classify("patch status of", err)
}

// statusAnswer is the API server's answer to a write of the node's status.
type statusAnswer struct {
	node *corev1.Node
	err  error
}

// patchStatus sends the JSON Patch ops to the node's status and returns where its answer
// comes.
func (p *Patcher) patchStatus(ctx context.Context, ops []operation) <-chan statusAnswer {
	answer := make(chan statusAnswer, 1)
	go func() {
		node, err := p.client.CoreV1().Nodes().Patch(ctx, p.node, types.JSONPatchType, mustJSON(ops),
			metav1.PatchOptions{FieldManager: wellknown.FieldManager}, "status")
		answer <- statusAnswer{node: node, err: err}
	}()
	return answer
}

// conditionAt returns the index of nodeready's condition in node's status, and whether it
// shows c (its status, reason and message).
func conditionAt(node *corev1.Node, c wellknown.Condition) (int, bool) {
	i := slices.IndexFunc(node.Status.Conditions, func(nc corev1.NodeCondition) bool { return nc.Type == wellknown.ConditionType })
	if i < 0 {
		return -1, false
	}
	old := node.Status.Conditions[i]
	return i, old.Status == c.Status && old.Reason == string(c.Reason) && old.Message == c.Message
}

// conditionOps returns the JSON Patch that writes c as nodeready's condition of node, and the
// index it will have. The entry is replaced where it is, after a test that it is still
// there, or appended (the list created when there is none) after a test that the node is
// still the one read: a JSON Patch, unlike the strategic merge of SetCondition (which puts a
// new entry first), says where the entry goes, so the release's write can test it there.
func conditionOps(node *corev1.Node, c wellknown.Condition) ([]operation, int) {
	now := metav1.NewTime(time.Now())
	entry := corev1.NodeCondition{Type: wellknown.ConditionType, Status: c.Status, Reason: string(c.Reason), Message: c.Message,
		LastHeartbeatTime: now, LastTransitionTime: now}
	i, _ := conditionAt(node, c)
	switch {
	case i >= 0:
		if old := node.Status.Conditions[i]; old.Status == c.Status {
			entry.LastTransitionTime = old.LastTransitionTime
		}
		path := "/status/conditions/" + strconv.Itoa(i)
		return []operation{{Op: "test", Path: path + "/type", Value: wellknown.ConditionType}, {Op: "replace", Path: path, Value: entry}}, i
	case len(node.Status.Conditions) > 0:
		// Appended only to the node as seen: on a newer one (a condition of ours written by
		// a write whose answer was lost) it would be a second condition of nodeready's type,
		// which the own-node policy refuses.
		return fenced(node, operation{Op: "add", Path: "/status/conditions/-", Value: entry}), len(node.Status.Conditions)
	default:
		return fenced(node, operation{Op: "add", Path: "/status/conditions", Value: []corev1.NodeCondition{entry}}), 0
	}
}

// fenced prepends to ops a test of node's resourceVersion: they apply only to the node
// as read, and a newer one refuses them (422), to be planned again from a fresh read.
func fenced(node *corev1.Node, ops ...operation) []operation {
	if len(ops) > 0 && ops[0].Op == "test" && ops[0].Path == "/metadata/resourceVersion" {
		return ops
	}
	return append([]operation{{Op: "test", Path: "/metadata/resourceVersion", Value: node.ResourceVersion}}, ops...)
}

// testsCondition puts before the release's patch the tests that the node shows c at index
// at: its type, status and reason. A write that comes before the condition's is refused
// (422) and changes nothing.
func testsCondition(patch []byte, at int, c wellknown.Condition) []byte {
	var ops []json.RawMessage
	if err := json.Unmarshal(patch, &ops); err != nil {
		panic(err) // the patch is our own encoding
	}
	path := "/status/conditions/" + strconv.Itoa(at)
	tests, err := json.Marshal([]operation{
		{Op: "test", Path: path + "/type", Value: wellknown.ConditionType},
		{Op: "test", Path: path + "/status", Value: c.Status},
		{Op: "test", Path: path + "/reason", Value: c.Reason},
	})
	if err != nil {
		panic(err)
	}
	var all []json.RawMessage
	if err := json.Unmarshal(tests, &all); err != nil {
		panic(err)
	}
	out, err := json.Marshal(append(all, ops...))
	if err != nil {
		panic(err)
	}
	return out
}
