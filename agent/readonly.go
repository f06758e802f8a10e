package agent

import (
	"context"
	"time"

	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/nodeready/nodeready/internal/config"
	"github.com/nodeready/nodeready/internal/kube"
	"github.com/nodeready/nodeready/internal/report"
	"github.com/nodeready/nodeready/internal/wellknown"
	"github.com/nodeready/nodeready/nodepatch"
)

// writers returns what the agent writes through: the node's Patcher and the
// Events, with their shutdown. With DRY_RUN=true it returns stand-ins that
// log each write instead of making it, as kube-node-ready stayed read-only
// with its dry run.
func writers(cfg config.Config, log zerolog.Logger, client kube.Interface, p *nodepatch.Patcher, spec nodepatch.Spec) (nodeWriter, eventer, func()) {
	if !cfg.ReadOnly {
		var sink report.EventClient
		if client != nil {
			sink = client.EventsV1().Events(metav1.NamespaceDefault)
		}
		events, shutdown := report.NewEvents(sink, cfg.NodeName, log, cfg.SettleTime)
		return p, events, shutdown
	}
	log.Info().Msg("Running read-only (DRY_RUN=true): the node, its condition and its Events are left as they are")
	return readOnly{read: p, spec: spec, log: log}, report.LogEvents(cfg.NodeName, log), nil
}

// readOnly is the nodeWriter of DRY_RUN=true: it logs the writes the Patcher
// would make. It holds only a nodeReader, so it has no way to write.
type readOnly struct {
	read nodeReader
	spec nodepatch.Spec
	log  zerolog.Logger
}

var _ nodeWriter = readOnly{}

// Release reads the node and logs what releasing it would change. Like the
// Patcher it waits for Karpenter to register the node.
func (r readOnly) Release(ctx context.Context, annotations map[string]string) (nodepatch.Outcome, error) {
	s, err := r.read.State(ctx)
	switch {
	case err != nil:
		return "", err
	case !s.Registered:
		return "", nodepatch.ErrNotRegistered
	}
	r.log.Info().Bool("remove_taint", !r.spec.KeepTaints && s.Tainted).Bool("add_label", !s.Labelled).Interface("annotations", annotations).
		Msg("Would release node, left it as it is (DRY_RUN=true)")
	return nodepatch.Unchanged, nil
}

// Mark logs the evidence the agent would record on the node for the fleet.
func (r readOnly) Mark(_ context.Context, labels, annotations map[string]string) (bool, error) {
	r.log.Info().Interface("labels", labels).Interface("annotations", annotations).
		Msg("Would record the failing checks on the node, left it as it is (DRY_RUN=true)")
	return false, nil
}

// FailOpen logs what releasing the node with failing checks would change.
func (r readOnly) FailOpen(ctx context.Context, annotations map[string]string) (nodepatch.Outcome, error) {
	r.log.Info().Str("label", r.spec.LabelKey+"="+wellknown.FailedOpenValue).Msg("Would fail open")
	return r.Release(ctx, annotations)
}

// ReleaseWith logs what releasing the node with its condition c would change.
func (r readOnly) ReleaseWith(ctx context.Context, c wellknown.Condition, annotations map[string]string) (nodepatch.Outcome, error) {
	if c.Reason == wellknown.FailedOpen {
		return r.FailOpen(ctx, annotations)
	}
	return r.Release(ctx, annotations)
}

// Withdraw has nothing to take back: no release was written.
func (r readOnly) Withdraw(context.Context, wellknown.Condition) (bool, error) { return false, nil }

// Settle has nothing to watch: no release was written.
func (r readOnly) Settle(context.Context, time.Duration) (int, error) { return 0, nil }

func (r readOnly) SetCondition(_ context.Context, c wellknown.Condition) (bool, error) {
	r.log.Info().Str("status", string(c.Status)).Str("reason", string(c.Reason)).Str("message", c.Message).
		Msg("Would set node condition (DRY_RUN=true)")
	return false, nil
}

// Taint logs that the re-verification would put the startup taint back on
// a node with neither the label nor the taint; the Patcher does so only if
// nodeready verified the node before.
func (r readOnly) Taint(ctx context.Context) (bool, error) {
	s, err := r.read.State(ctx)
	if err != nil {
		return false, err
	}
	if !s.Tainted && !s.Labelled {
		r.log.Info().Msg("Would put the startup taint back for re-verification if nodeready verified the node before (DRY_RUN=true)")
	}
	return false, nil
}

func (r readOnly) Replace(context.Context, dynamic.Interface) (string, error) {
	r.log.Warn().Msg("Would delete the node's NodeClaim, else the Node (DRY_RUN=true)")
	return "nothing (DRY_RUN=true)", nil
}
