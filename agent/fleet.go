package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/nodeready/nodeready/internal/config"
	"github.com/nodeready/nodeready/internal/kube"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// An agent sees one node, and a fault every new node shares (a cluster domain
// the configuration gets wrong, a dependency down, a typo in a gate) looks from
// each of them like its own. So a failure action (fail-open, replace-node) needs
// evidence from the fleet that the fault is this node's alone, as the node
// lifecycle controller stops evicting when most of a zone is NotReady:
//
//   - another node of the same configuration (config.Fingerprint) passed within
//     FLEET_WINDOW, and
//   - for each check failing here, fewer than 3 nodes of that configuration fail
//     it, or they are less than SHARED_FAULT_PERCENTAGE of those that failed it or
//     passed (kube-controller-manager's partial disruption: at least 3 NotReady
//     and at least 55 % of the zone).
//
// Without it the node stays held, its condition SharedFault saying why. The
// evidence is each agent's own node's metadata (wellknown.ConfigLabel and the
// failing annotations): a verified node's release wrote its config label, a
// failing node's agent writes it with its failing checks (Mark) when its failure
// is recorded. It is read only when an action is due, metadata only, selected by
// that label (docs/checks.md, "Whose fault it is").

// fleet reads and writes the evidence for one agent.
type fleet struct {
	client      kube.Interface
	node        string
	fingerprint string
	// label and value: the verified label, and its value on a verified node.
	label, value string
	window       time.Duration
	percentage   int
	// marked is the evidence last written on the own node, so it is written
	// again only when it changes.
	marked string
	// every bounds how often the evidence is read: once a round after the
	// failure (RETRY_BACKOFF_MAX), so a thousand nodes failing alike cost a read
	// each per RETRY_BACKOFF_MAX, not per round before it; next is when it may be
	// read again, and last what it said then.
	every time.Duration
	next  time.Time
	last  string
	// backoff is how many intervals of every the next read waits.
	backoff int
}

// minSharedFailing is kube-controller-manager's: a zone is partially disrupted
// only with more than 2 nodes NotReady.
const minSharedFailing = 3

func newFleet(cfg config.Config, client kube.Interface) *fleet {
	return &fleet{
		client: client, node: cfg.NodeName, fingerprint: cfg.Fingerprint(),
		label: cfg.VerifiedLabel, value: cfg.VerifiedLabelValue,
		window: cfg.FleetWindow, percentage: cfg.SharedFaultPercentage, every: cfg.RetryBackoffMax,
	}
}

// hour is the bucket of the config label's value: a read selects the nodes of
// the last hours only, not every node a configuration ever verified.
func hour(t time.Time) string { return t.UTC().Format("2006010215") }

// configValue is the config label's value for t: <fingerprint>.<YYYYMMDDHH>.
func (f *fleet) configValue(t time.Time) string { return f.fingerprint + "." + hour(t) }

// releaseLabels are the labels a release sets besides the verified label: the
// config label, in the hour the agent started (a node whose verification takes
// longer than an hour counts as a pass for an hour less).
func (f *fleet) releaseLabels(started time.Time) map[string]string {
	return map[string]string{wellknown.ConfigLabel(f.label): f.configValue(started)}
}

// selector selects the nodes of this configuration whose config label was
// written in the window, or in the hour before it (a verified node's is the hour
// its agent started), and whose verified label matches op (selection.Equals: the
// nodes verified; selection.NotEquals: the others, held or failed open).
func (f *fleet) selector(now time.Time, op selection.Operator) labels.Selector {
	var values []string
	for t := now.Add(-f.window - time.Hour).Truncate(time.Hour); !t.After(now); t = t.Add(time.Hour) {
		values = append(values, f.configValue(t))
	}
	config, err := labels.NewRequirement(wellknown.ConfigLabel(f.label), selection.In, values)
	if err != nil {
		panic(err) // the label is valid (config), and so are the values
	}
	verified, err := labels.NewRequirement(f.label, op, []string{f.value})
	if err != nil {
		panic(err)
	}
	return labels.NewSelector().Add(*config, *verified)
}

// failingValue is the failing annotation's value: the failing checks, sorted,
// comma-separated, whole names within 64 bytes (the admission policy's bound).
func failingValue(names []string) string {
	names = slices.Compact(slices.Sorted(slices.Values(names)))
	var kept []string
	for _, n := range names {
		if len(strings.Join(append(kept, n), ",")) > 64 {
			break
		}
		kept = append(kept, n)
	}
	return strings.Join(kept, ",")
}

// evidence is what a read of the fleet found.
type evidence struct {
	// passed: nodes of the configuration whose agent verified them within the window.
	passed int
	// failing: per check, nodes of the configuration that fail it, this one included.
	failing map[string]int
}

// count reads the items (the metadata of the nodes selected) as evidence about
// the checks failing here (own).
func (f *fleet) count(items []metav1.PartialObjectMetadata, own []string, now time.Time) evidence {
	e := evidence{failing: map[string]int{}}
	for _, c := range own {
		e.failing[c] = 1 // this node
	}
	for _, n := range items {
		if n.Name == f.node {
			continue
		}
		value, labelled := n.Labels[f.label]
		if labelled && value == f.value {
			at, err := time.Parse(time.RFC3339, n.Annotations[wellknown.ReleasedAtAnnotation(f.label)])
			if err == nil && now.Sub(at) <= f.window {
				e.passed++
			}
			continue
		}
		// Held, or released failing (fail-open): its agent's record of what fails.
		for c := range strings.SplitSeq(n.Annotations[wellknown.FailingAnnotation(f.label)], ",") {
			if _, ok := e.failing[c]; ok {
				e.failing[c]++
			}
		}
	}
	return e
}

// shared says why the fault of the checks failing here (own) looks shared, or ""
// when the evidence shows it is this node's own.
func (e evidence) shared(own []string, window time.Duration, percentage int) string {
	if e.passed == 0 {
		return fmt.Sprintf("no node of this configuration passed in the last %s", window)
	}
	for _, c := range own {
		failing := e.failing[c]
		if failing >= minSharedFailing && 100*failing >= percentage*(failing+e.passed) {
			return fmt.Sprintf("%d of the %d nodes of this configuration that failed %s or passed in the last %s fail it",
				failing, failing+e.passed, c, window)
		}
	}
	return ""
}

// judge reads the evidence about the checks failing here (own) and says why the
// fault looks shared, or "" when it is the node's own. A read that fails is no
// evidence: the action waits. It reads the nodes of the configuration verified
// first, and the others only when one of those passed in the window: a fault that
// fails every node costs reads that return nothing. Until the next read is due its
// verdict stands; while the fault looks shared, the reads come twice as far apart
// each time, up to maxFleetBackoff reads' intervals, as the fleet's evidence
// changes by minutes, not seconds.
func (f *fleet) judge(ctx context.Context, own []string) string {
	now := time.Now()
	if now.Before(f.next) {
		return f.last
	}
	why := f.read(ctx, own, now)
	switch {
	case why == "":
		f.backoff = 1
	case f.backoff == 0:
		f.backoff = 1
	case f.backoff < maxFleetBackoff:
		f.backoff *= 2
	}
	f.next = now.Add(time.Duration(f.backoff) * f.every)
	f.last = why
	return why
}

// maxFleetBackoff bounds the spacing of the reads while a fault looks shared: 16
// intervals of RETRY_BACKOFF_MAX, 8 minutes with its default.
const maxFleetBackoff = 16

// read reads the evidence: the nodes of the configuration verified, then, when one
// of them passed in the window, the others.
func (f *fleet) read(ctx context.Context, own []string, now time.Time) string {
	if f.client == nil {
		return "the fleet cannot be read without a client"
	}
	list := func(op selection.Operator) ([]metav1.PartialObjectMetadata, error) {
		l, err := f.client.CoreV1().NodesMetadata(ctx, metav1.ListOptions{
			LabelSelector: f.selector(now, op).String(),
			// From the API server's watch cache: no read of etcd, and as fresh as
			// evidence that spans minutes needs.
			ResourceVersion: "0",
		})
		if err != nil {
			return nil, err
		}
		return l.Items, nil
	}
	verified, err := list(selection.Equals)
	if err != nil {
		return "could not read the fleet: " + err.Error()
	}
	e := f.count(verified, own, now)
	if e.passed == 0 {
		return fmt.Sprintf("no node of this configuration passed in the last %s", f.window)
	}
	others, err := list(selection.NotEquals)
	if err != nil {
		return "could not read the fleet: " + err.Error()
	}
	return f.count(append(verified, others...), own, now).shared(own, f.window, f.percentage)
}

// passed tells whether a node of this configuration was verified in the window
// or the hour before it: a check that nodeready verified proves it could pass
// in this cluster (the networkpolicy check: an engine enforces the canary
// somewhere). One read of metadata, from the watch cache, only when the check
// fails.
func (f *fleet) passed(ctx context.Context) (bool, error) {
	l, err := f.client.CoreV1().NodesMetadata(ctx, metav1.ListOptions{
		LabelSelector:   f.selector(time.Now(), selection.Equals).String(),
		ResourceVersion: "0",
	})
	if err != nil {
		return false, err
	}
	for _, n := range l.Items {
		if n.Name != f.node {
			return true, nil
		}
	}
	return false, nil
}

// mark returns the evidence to write on the own node while checks fail here
// (names), and whether it differs from what was last written; the config label
// follows the hour, so that reads keep selecting the node while it fails.
func (f *fleet) mark(names []string, now time.Time) (labels, annotations map[string]string, changed bool) {
	value := failingValue(names)
	labels = map[string]string{wellknown.ConfigLabel(f.label): f.configValue(now)}
	annotations = map[string]string{
		wellknown.FailingAnnotation(f.label):  value,
		wellknown.FailedAtAnnotation(f.label): now.UTC().Format(time.RFC3339),
	}
	key := labels[wellknown.ConfigLabel(f.label)] + " " + value
	if key == f.marked {
		return nil, nil, false
	}
	return labels, annotations, true
}
