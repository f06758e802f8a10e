// Package uninstall removes nodeready from a cluster without stranding a node:
// `nodeready uninstall`, which the chart's pre-delete hook and
// manifests/uninstall/ run as a Job in the agent's image, with the agent's
// configuration (to know the startup taints and the verified label) and a
// ServiceAccount of its own, not the agent's.
//
// In order: it deletes the creation-time policy's binding, so the API server
// taints no new node; waits a while for the running agents to release their
// nodes as usual; releases every node still held (its startup taints removed,
// no label: it was not verified; a Warning Event says so); deletes the
// DaemonSet, but only once no node is left held, and waits a bounded time for
// its pods to be gone (a pod on a node whose kubelet is down never goes, and
// waiting on it would fail the uninstall until that node is deleted: it is
// named, and the uninstall goes on); releases the nodes tainted meanwhile;
// and, when asked, removes what nodeready wrote on every node. Every step is
// idempotent: a run that failed is run again.
package uninstall

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeready/nodeready/internal/config"
	"github.com/nodeready/nodeready/internal/kube"
	"github.com/nodeready/nodeready/internal/wellknown"
	"github.com/nodeready/nodeready/nodepatch"
)

// Options are the flags of `nodeready uninstall`.
type Options struct {
	// ReleaseHeld releases the nodes still held (steps 2, 3 and 5).
	ReleaseHeld bool
	// DaemonSet is namespace/name of the agents' DaemonSet, deleted once no node is held.
	// Only with ReleaseHeld: without it, the nodes still held would lose their agents.
	DaemonSet string
	// WaitForPods bounds the wait for the DaemonSet's pods to be gone.
	WaitForPods time.Duration
	// CreationPolicyBinding is the MutatingAdmissionPolicyBinding that taints new nodes,
	// deleted first.
	CreationPolicyBinding string
	// WaitForAgents is how long the running agents get to release their nodes.
	WaitForAgents time.Duration
	// RemoveMarks removes the verified label, the completion annotations and the
	// condition from every node.
	RemoveMarks bool
}

// Flags reads the options from args; the usage goes to out.
func Flags(args []string, out io.Writer) (Options, error) {
	var o Options
	fs := flag.NewFlagSet("nodeready uninstall", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.BoolVar(&o.ReleaseHeld, "release-held", false, "release every node that still carries a startup taint, unverified")
	fs.StringVar(&o.DaemonSet, "daemonset", "", "namespace/name of the agents' DaemonSet, deleted once no node is held (needs -release-held)")
	fs.DurationVar(&o.WaitForPods, "wait-for-pods", DefaultWaitForPods, "how long to wait for the DaemonSet's pods to be gone; pods left then (on nodes whose kubelet does not answer) are named, and the uninstall goes on")
	fs.StringVar(&o.CreationPolicyBinding, "creation-policy-binding", "", "the MutatingAdmissionPolicyBinding that taints new nodes, deleted first")
	fs.DurationVar(&o.WaitForAgents, "wait-for-agents", 0, "how long the running agents get to release their nodes")
	fs.BoolVar(&o.RemoveMarks, "remove-marks", false, "remove the verified label, the completion annotations and the condition from every node")
	if err := fs.Parse(args); err != nil {
		return Options{}, err
	}
	if fs.NArg() > 0 {
		return Options{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.DaemonSet != "" {
		if ns, name, ok := strings.Cut(o.DaemonSet, "/"); !ok || ns == "" || name == "" {
			return Options{}, fmt.Errorf("-daemonset %q: use namespace/name, such as kube-system/nodeready", o.DaemonSet)
		}
		if !o.ReleaseHeld {
			// Deleting the DaemonSet while nodes are held would leave them with the
			// startup taint and no agent to remove it.
			return Options{}, fmt.Errorf("-daemonset %q needs -release-held: without it, the nodes still held would keep the startup taint with no agent to remove it", o.DaemonSet)
		}
	}
	if o.WaitForPods <= 0 {
		return Options{}, fmt.Errorf("-wait-for-pods %s: must be above 0s", o.WaitForPods)
	}
	return o, nil
}

// DefaultWaitForPods is -wait-for-pods's default: an agent pod ends within its
// termination grace period (30s) once its node's kubelet gets the deletion.
const DefaultWaitForPods = 60 * time.Second

// Uninstaller takes nodeready off one cluster.
type Uninstaller struct {
	client kube.Interface
	cfg    config.Config
	log    zerolog.Logger
}

// New returns an uninstaller that writes through client, for the startup taints and
// the verified label of cfg.
func New(client kube.Interface, cfg config.Config, log zerolog.Logger) *Uninstaller {
	return &Uninstaller{client: client, cfg: cfg, log: log}
}

// Run carries out the steps that o asks for. A node that could not be released stops
// it before the DaemonSet is deleted, so no held node loses its agent.
func (u *Uninstaller) Run(ctx context.Context, o Options) error {
	if o.CreationPolicyBinding != "" {
		err := u.client.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Delete(ctx, o.CreationPolicyBinding, metav1.DeleteOptions{})
		switch {
		case err == nil:
			u.log.Info().Str("binding", o.CreationPolicyBinding).Msg("Deleted the creation-time policy's binding, no new node gets the startup taint from it")
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("delete MutatingAdmissionPolicyBinding %s: %w", o.CreationPolicyBinding, err)
		}
	}
	if o.ReleaseHeld {
		if o.WaitForAgents > 0 {
			u.waitForAgents(ctx, o.WaitForAgents)
		}
		if err := u.releaseHeld(ctx); err != nil {
			return err
		}
	}
	if o.DaemonSet != "" {
		if !o.ReleaseHeld {
			return errors.New("deleting the DaemonSet needs releasing the held nodes, or they would keep the startup taint with no agent")
		}
		if err := u.deleteDaemonSet(ctx, o.DaemonSet, o.WaitForPods); err != nil {
			return err
		}
		if err := u.releaseHeld(ctx); err != nil {
			return err
		}
	}
	if o.RemoveMarks {
		return u.removeMarks(ctx)
	}
	return nil
}

// waitForAgents waits, up to d, until no node is held: the agents release theirs as usual.
func (u *Uninstaller) waitForAgents(ctx context.Context, d time.Duration) {
	err := wait.PollUntilContextTimeout(ctx, time.Second, d, true, func(ctx context.Context) (bool, error) {
		held, err := u.held(ctx)
		return err == nil && len(held) == 0, nil
	})
	if err != nil {
		u.log.Info().Dur("waited", d).Msg("Nodes still held after the wait for their agents, releasing them")
	}
}

// held lists the nodes that carry a startup taint.
func (u *Uninstaller) held(ctx context.Context) ([]string, error) {
	list, err := u.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	spec := u.spec()
	var held []string
	for i := range list.Items {
		if slices.ContainsFunc(list.Items[i].Spec.Taints, spec.IsStartupTaint) {
			held = append(held, list.Items[i].Name)
		}
	}
	return held, nil
}

func (u *Uninstaller) spec() nodepatch.Spec {
	return nodepatch.Spec{Taints: u.cfg.StartupTaints, LabelKey: u.cfg.VerifiedLabel, LabelValue: u.cfg.VerifiedLabelValue}
}

// releaseHeld releases every node still held: its startup taints removed, whether or
// not it carries the label (no agent runs there either way), and a Warning Event.
func (u *Uninstaller) releaseHeld(ctx context.Context) error {
	held, err := u.held(ctx)
	if err != nil {
		return err
	}
	var failed []error
	for _, name := range held {
		wrote, err := nodepatch.New(u.client, name, u.spec()).Untaint(ctx, wellknown.UninstallFieldManager)
		switch {
		case errors.Is(err, nodepatch.ErrNodeNotFound):
			continue // deleted meanwhile
		case err != nil:
			failed = append(failed, fmt.Errorf("release node %s: %w", name, err))
			continue
		case !wrote:
			continue
		}
		u.log.Warn().Str("node", name).Msg("Released node still held, unverified")
		u.event(ctx, name)
	}
	if err := errors.Join(failed...); err != nil {
		return fmt.Errorf("%w; nothing else was removed, so no held node loses its agent: run the uninstall again", err)
	}
	return nil
}

// event records on the node why its startup taint is gone.
func (u *Uninstaller) event(ctx context.Context, node string) {
	_, err := u.client.EventsV1().Events(metav1.NamespaceDefault).Create(ctx, &eventsv1.Event{
		// Named as client-go's recorder names Events: the object and the time, in hex.
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", node, time.Now().UnixNano())},
		EventTime:           metav1.NowMicro(),
		ReportingController: wellknown.UninstallController,
		ReportingInstance:   wellknown.UninstallFieldManager,
		Action:              "Untaint",
		Reason:              string(wellknown.ReleasedAtUninstall),
		Type:                corev1.EventTypeWarning,
		Regarding:           corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node, UID: types.UID(node)},
		Note:                "nodeready was uninstalled while this node was held: its startup taints were removed without verification",
	}, metav1.CreateOptions{})
	if err != nil {
		u.log.Warn().Err(err).Str("node", node).Msg("Could not send Event")
	}
}

// deleteDaemonSet deletes the agents' DaemonSet and waits, at most bound, until it
// and its pods are gone: an agent stopped during its checks writes nothing, one
// stopped during its release carries the release through. A pod whose node's
// kubelet does not answer is never confirmed gone (it stays Terminating until
// the node comes back or is deleted), and the foreground deletion keeps the
// DaemonSet until then: past the bound, the pods left are named in a warning
// and the uninstall goes on. Such an agent cannot reach the API server either
// way, and its permissions go with the rest of nodeready.
func (u *Uninstaller) deleteDaemonSet(ctx context.Context, key string, bound time.Duration) error {
	if bound <= 0 {
		bound = DefaultWaitForPods
	}
	ns, name, _ := strings.Cut(key, "/")
	ds, err := u.client.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("get DaemonSet %s: %w", key, err)
	}
	foreground := metav1.DeletePropagationForeground
	err = u.client.AppsV1().DaemonSets(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &foreground})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete DaemonSet %s: %w", key, err)
	}
	err = wait.PollUntilContextTimeout(ctx, time.Second, bound, true, func(ctx context.Context) (bool, error) {
		_, err := u.client.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	switch {
	case err == nil:
		u.log.Info().Str("daemonset", key).Msg("Deleted the agents' DaemonSet and its pods")
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("wait for DaemonSet %s and its pods to be gone: %w", key, ctx.Err())
	}
	left := u.podsLeft(ctx, ns, ds.Spec.Selector)
	u.log.Warn().Str("daemonset", key).Dur("waited", bound).Strs("pods", left).
		Msg("Agent pods not gone after the wait, on nodes whose kubelet does not answer; they end when their node comes back or is deleted")
	return nil
}

// podsLeft names the DaemonSet's pods still there, as pod@node.
func (u *Uninstaller) podsLeft(ctx context.Context, ns string, selector *metav1.LabelSelector) []string {
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return nil
	}
	pods, err := u.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		u.log.Warn().Err(err).Msg("Could not list the agent pods left")
		return nil
	}
	var left []string
	for _, p := range pods.Items {
		left = append(left, p.Name+"@"+p.Spec.NodeName)
	}
	return left
}

// removeMarks removes from every node what nodeready wrote: the verified label, the
// completion annotations and its condition.
func (u *Uninstaller) removeMarks(ctx context.Context) error {
	list, err := u.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	label := u.cfg.VerifiedLabel
	annotations := map[string]any{}
	for _, a := range nodereadyAnnotations(label) {
		annotations[a] = nil
	}
	marks, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{label: nil}, "annotations": annotations}})
	condition, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []map[string]any{
		{"type": wellknown.ConditionType, "$patch": "delete"}}}})
	opts := metav1.PatchOptions{FieldManager: wellknown.UninstallFieldManager}
	var failed []error
	for _, n := range list.Items {
		if !marked(&n, label) {
			continue
		}
		if _, err := u.client.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, marks, opts); err != nil && !apierrors.IsNotFound(err) {
			failed = append(failed, fmt.Errorf("node %s: %w", n.Name, err))
			continue
		}
		if _, err := u.client.CoreV1().Nodes().Patch(ctx, n.Name, types.StrategicMergePatchType, condition, opts, "status"); err != nil && !apierrors.IsNotFound(err) {
			failed = append(failed, fmt.Errorf("status of node %s: %w", n.Name, err))
			continue
		}
		u.log.Info().Str("node", n.Name).Msg("Removed nodeready's label, annotations and condition")
	}
	return errors.Join(failed...)
}

// marked reports whether n carries anything nodeready wrote.
func marked(n *corev1.Node, label string) bool {
	if _, ok := n.Labels[label]; ok {
		return true
	}
	for _, a := range nodereadyAnnotations(label) {
		if _, ok := n.Annotations[a]; ok {
			return true
		}
	}
	return slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == wellknown.ConditionType })
}

// nodereadyAnnotations lists the annotations nodeready writes on nodes: the agent's completion
// record, and the record of a release by hand (kubectl nodeready release).
func nodereadyAnnotations(label string) []string {
	return append(wellknown.Annotations(label), wellknown.HandReleaseAnnotations(label)...)
}
