package agent

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"

	"github.com/nodeready/nodeready/config"
	"github.com/nodeready/nodeready/nodepatch"
)

// newWriters returns what the agent writes through: the node's Patcher and
// an Event recorder with its shutdown. With DRY_RUN=true it returns
// read-only stand-ins that log each write instead of making it, as
// kube-node-ready stayed read-only with its dry run.
func newWriters(cfg config.Config, log zerolog.Logger, client kubernetes.Interface, spec nodepatch.Spec) (nodeWriter, events.EventRecorder, func()) {
	p := nodepatch.New(client, cfg.NodeName, spec)
	if !cfg.ReadOnly {
		recorder, shutdown := newRecorder(client, log, mustSendBudget(cfg.SettleTime))
		return p, recorder, shutdown
	}
	log.Info().Msg("Running read-only (DRY_RUN=true): the node, its condition and its Events are left as they are")
	return &readOnlyNode{nodeWriter: p, client: client, name: cfg.NodeName, spec: spec, log: log}, readOnlyEvents{log: log}, nil
}

// readOnlyNode logs the writes the Patcher would make. The Patcher is
// embedded for its reads only (readOnlyReads): every write of nodeWriter is
// overridden here, and a test fails for any that is not.
type readOnlyNode struct {
	nodeWriter
	client kubernetes.Interface
	name   string
	spec   nodepatch.Spec
	log    zerolog.Logger
}

// readOnlyReads are the methods of nodeWriter that only read, so
// readOnlyNode passes them through to the Patcher.
var readOnlyReads = []string{"Confirm", "State", "Watch"}

// Karpenter's node labels: a node with the first is Karpenter-managed, and
// Karpenter sets the second once it has registered the node.
const (
	karpenterNodePoolLabel   = "karpenter.sh/nodepool"
	karpenterRegisteredLabel = "karpenter.sh/registered"
)

// Release reads the node and logs what releasing it would change. Like the
// Patcher it waits for Karpenter to register the node.
func (r *readOnlyNode) Release(ctx context.Context, annotations map[string]string) (nodepatch.Outcome, error) {
	node, err := r.get(ctx)
	if err != nil {
		return "", err
	}
	if _, managed := node.Labels[karpenterNodePoolLabel]; managed && node.Labels[karpenterRegisteredLabel] != "true" {
		return "", nodepatch.ErrNotRegistered
	}
	r.log.Info().Bool("remove_taint", !r.spec.KeepTaints && r.tainted(node)).Bool("add_label", !r.labelled(node)).Interface("annotations", annotations).
		Msg("Would release node, left it as it is (DRY_RUN=true)")
	return nodepatch.Unchanged, nil
}

// FailOpen logs what releasing the node with failing checks would change.
func (r *readOnlyNode) FailOpen(ctx context.Context, annotations map[string]string) (nodepatch.Outcome, error) {
	r.log.Info().Str("label", r.spec.LabelKey+"="+nodepatch.FailedOpenValue).Msg("Would fail open")
	return r.Release(ctx, annotations)
}

// Settle has nothing to watch: no release was written.
func (r *readOnlyNode) Settle(context.Context, time.Duration) (int, error) { return 0, nil }

func (r *readOnlyNode) SetCondition(_ context.Context, c nodepatch.Condition) (bool, error) {
	r.log.Info().Str("status", string(c.Status)).Str("reason", c.Reason).Str("message", c.Message).
		Msg("Would set node condition (DRY_RUN=true)")
	return false, nil
}

// Taint logs that the re-verification would put the startup taint back on
// a node with neither the label nor the taint; the Patcher does so only if
// nodeready verified the node before.
func (r *readOnlyNode) Taint(ctx context.Context) (bool, error) {
	node, err := r.get(ctx)
	if err != nil {
		return false, err
	}
	if !r.tainted(node) && !r.labelled(node) {
		r.log.Info().Msg("Would put the startup taint back for re-verification if nodeready verified the node before (DRY_RUN=true)")
	}
	return false, nil
}

func (r *readOnlyNode) Replace(context.Context, dynamic.Interface) (string, error) {
	r.log.Warn().Msg("Would delete the node's NodeClaim, else the Node (DRY_RUN=true)")
	return "nothing (DRY_RUN=true)", nil
}

func (r *readOnlyNode) get(ctx context.Context) (*corev1.Node, error) {
	node, err := r.client.CoreV1().Nodes().Get(ctx, r.name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get node %s: %w", r.name, err)
	}
	return node, nil
}

func (r *readOnlyNode) tainted(node *corev1.Node) bool {
	return slices.ContainsFunc(node.Spec.Taints, r.spec.IsStartupTaint)
}

func (r *readOnlyNode) labelled(node *corev1.Node) bool {
	return node.Labels[r.spec.LabelKey] == r.spec.LabelValue
}

// readOnlyEvents logs the Events the agent would emit.
type readOnlyEvents struct{ log zerolog.Logger }

func (e readOnlyEvents) Eventf(_, _ runtime.Object, eventtype, reason, action, note string, args ...any) {
	e.log.Info().Str("type", eventtype).Str("reason", reason).Str("action", action).Str("note", fmt.Sprintf(note, args...)).
		Msg("Would emit Event (DRY_RUN=true)")
}
