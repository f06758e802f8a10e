// Package nodepatch releases the agent's own Node: it adds the verified label
// and removes the startup taint in one optimistic write, confirmed by the node
// the API server answers with. Every other taint, label and annotation
// survives, also when other controllers write the node at the same moment.
package nodepatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeready/nodeready/internal/kube"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// Outcome says what Release did to the node.
type Outcome string

const (
	// Patched: the label was added and/or the taint removed by this call.
	Patched Outcome = "patched"
	// Unchanged: the node was already verified; nothing was written.
	Unchanged Outcome = "unchanged"
)

// Sentinel errors for outcomes callers branch on.
var (
	// ErrForbidden: RBAC or an admission policy refused the write. Retrying
	// does not help; the installation is wrong.
	ErrForbidden = errors.New("forbidden")
	// ErrNodeNotFound: the node was deleted (or NODE_NAME is wrong).
	ErrNodeNotFound = errors.New("node not found")
	// ErrNotRegistered: the node is Karpenter's and Karpenter has not
	// registered it yet. Karpenter merges its startupTaints into the Node at
	// registration, so a taint removed before that would come back.
	ErrNotRegistered = errors.New("waiting for Karpenter to register the node (label karpenter.sh/registered=true)")
	// ErrControlPlane: replace-node refused to delete a control-plane node.
	// Retrying does not help; nodeready should not run there.
	ErrControlPlane = errors.New("refusing to replace a control-plane node")
	// ErrNotHeld: replace-node found the node without the startup taint when it
	// read it right before the deletion: someone released it, so workloads that do
	// not tolerate the taint may run there, and it is not nodeready's to delete.
	ErrNotHeld = errors.New("refusing to replace a node that no longer carries the startup taint")
	// ErrVerifiedBefore: replace-node found nodeready's completion record on the
	// node: nodeready released it before, so it may have served workloads for a long
	// time (a re-verification put the taint back). Such a node is never replaced.
	ErrVerifiedBefore = errors.New("refusing to replace a node that nodeready verified before")
	// ErrUnknownOutcome: the write got no answer (a timeout, a lost
	// connection, the context ended) or a server error, either of which can
	// come after the API server stored it. Confirm finds out.
	ErrUnknownOutcome = errors.New("no answer to the write, it may have landed")
	// ErrNotConfirmed: the write went through but the node it stored is not
	// verified (an admission plugin put the taint back or dropped the label).
	ErrNotConfirmed = errors.New("the node as written is not verified")
	// ErrReleased: a condition saying the node is not released was not written,
	// as the node shows that a release whose write got no answer landed after all.
	ErrReleased = errors.New("not written: the node shows a release that got no answer landed")
)

// Spec is what a verified node looks like.
type Spec struct {
	// Taints to remove: every taint with the key and effect of one of them,
	// whatever its value. The first is the one named in messages.
	Taints []corev1.Taint
	// Label to set.
	LabelKey, LabelValue string
	// KeepTaints: the startup taints are another controller's, which removes
	// them when nodeready's condition turns True (a NodeReadinessRule). A
	// release sets the label only and never writes a taint; the taints still
	// tell a held node (State, Replace).
	KeepTaints bool
	// Labels are more labels a release sets, in the same write as LabelKey: the
	// config label, the fleet's evidence that this configuration passed here.
	Labels map[string]string
	// Drop are annotations a release removes, in the same write, where the node
	// has them: the failing checks an earlier round recorded (Mark).
	Drop []string
}

// Patcher releases one node.
type Patcher struct {
	client  kube.Interface
	node    string
	spec    Spec
	backoff wait.Backoff
	// confirmedRV is the resourceVersion of the last node seen verified;
	// Settle watches from there.
	confirmedRV string
	// last is the node as last read or written, so a condition write right
	// after a release needs no read of its own.
	last *corev1.Node
	// written is the node as the last own write answered it, and writtenRestarts the
	// view's restarts then: until the watch shows that version, the node the view
	// holds is older (latest).
	written         *corev1.Node
	writtenRestarts int64
	// view is the watch of the node, when Watch started one.
	view *view
	// outstanding: a release's write got no answer and may still land (or has
	// landed, as a read found), and no condition written since fences it off
	// (Withdraw); only a release that sees the node released lifts it. Until then a condition that
	// says the node is not released is written as Withdraw writes it (SetCondition),
	// or the late label would land beside it.
	outstanding atomic.Bool
	// value is the label value of the last release: LabelValue, or wellknown.FailedOpenValue after
	// FailOpen. Settle releases again with it.
	value string
}

// Karpenter's node labels: a node with the first is Karpenter-managed, and
// Karpenter sets the second once it has registered the node.
const (
	karpenterNodePoolLabel   = "karpenter.sh/nodepool"
	karpenterRegisteredLabel = "karpenter.sh/registered"
)

// conflictBackoff bounds the re-read/recompute/retry cycle. Writers that
// race us (the node lifecycle controller, CNI agents) finish in milliseconds,
// so short, jittered steps win quickly; eight steps span about five seconds.
var conflictBackoff = wait.Backoff{Steps: 8, Duration: 20 * time.Millisecond, Factor: 2, Jitter: 0.5}

// New returns a Patcher for the node named node.
func New(client kube.Interface, node string, spec Spec) *Patcher {
	return &Patcher{client: client, node: node, spec: spec, backoff: conflictBackoff, value: spec.LabelValue}
}

// Release makes the node verified: label present, startup taint gone, and,
// in the same write, the given annotations set (the completion record). It
// writes nothing when the node already is verified. It plans the write from
// the node as the watch last showed it (Watch), else from a read. The PATCH
// answer is the node as stored, so it confirms the write without a
// read-back; a taint that comes back later is Settle's. A lost optimistic
// lock (409, or 422 from a failed JSON Patch test) and an answer that is not
// verified are retried with a fresh read; everything else is returned at
// once, a write that got no answer as ErrUnknownOutcome.
func (p *Patcher) Release(ctx context.Context, annotations map[string]string) (Outcome, error) {
	return p.release(ctx, p.spec.LabelValue, nil, annotations)
}

// FailOpen releases the node as Release does, with the verified label set to
// wellknown.FailedOpenValue: released, but not verified.
func (p *Patcher) FailOpen(ctx context.Context, annotations map[string]string) (Outcome, error) {
	return p.release(ctx, wellknown.FailedOpenValue, nil, annotations)
}

// Verified reports whether node is released: it carries the label, as verified or failed
// open, and none of the startup taints.
func (p *Patcher) Verified(node *corev1.Node) bool {
	return p.labelled(node) && (p.spec.KeepTaints || !p.hasTaint(node))
}

// labelled reports whether node carries the verified label, as verified or failed open.
func (p *Patcher) labelled(node *corev1.Node) bool {
	v, ok := node.Labels[p.spec.LabelKey]
	return ok && (v == p.spec.LabelValue || v == wellknown.FailedOpenValue)
}

func (p *Patcher) get(ctx context.Context) (*corev1.Node, error) {
	node, err := p.client.CoreV1().Nodes().Get(ctx, p.node, metav1.GetOptions{})
	if err != nil {
		return nil, readError{p.classify("get", err)}
	}
	p.last = node
	return node, nil
}

// readError is a failed read of the node: nothing more about it can be
// learned until a later read succeeds.
type readError struct{ error }

func (e readError) Unwrap() error { return e.error }

// IsReadError reports whether err is, or wraps, a failed read of the node.
func IsReadError(err error) bool {
	return errors.As(err, new(readError))
}

func (p *Patcher) hasTaint(node *corev1.Node) bool {
	for _, t := range node.Spec.Taints {
		if p.matches(t) {
			return true
		}
	}
	return false
}

func (p *Patcher) matches(t corev1.Taint) bool { return p.spec.IsStartupTaint(t) }

// removes tells a taint the release removes: a startup taint, unless they are kept.
func (p *Patcher) removes(t corev1.Taint) bool { return !p.spec.KeepTaints && p.matches(t) }

// IsStartupTaint reports whether t has the key and effect of one of the startup taints.
func (s Spec) IsStartupTaint(t corev1.Taint) bool {
	return slices.ContainsFunc(s.Taints, func(st corev1.Taint) bool { return st.MatchTaint(&t) })
}

// classify wraps API errors so callers can branch with errors.Is and people
// read what to do.
func (p *Patcher) classify(verb string, err error) error {
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%s node %s: %w: check the ClusterRole and the admission policy: %w", verb, p.node, ErrForbidden, err)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%s node %s: %w: %w", verb, p.node, ErrNodeNotFound, err)
	default:
		return fmt.Errorf("%s node %s: %w", verb, p.node, err)
	}
}

// retry runs fn until it succeeds, fails for good, ctx ends or the backoff
// runs out; then the last error is returned. It is retry.OnError with a
// context, so a SIGTERM during a conflict storm is not slept through.
func (p *Patcher) retry(ctx context.Context, fn func() error) error {
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, p.backoff, func(context.Context) (bool, error) {
		last = fn()
		switch {
		case last == nil:
			return true, nil
		case retriable(last):
			return false, nil
		default:
			return false, last
		}
	})
	if wait.Interrupted(err) && ctx.Err() == nil && last != nil {
		return last // the backoff ran out: report why
	}
	return err
}

func retriable(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsInvalid(err) || errors.Is(err, ErrNotConfirmed)
}
