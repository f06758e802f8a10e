package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/nodeready/nodeready/internal/wellknown"
)

// ErrRefused is a write the plugin will not make: the node is not in a state the command
// is for. The message says why and what to do instead.
var ErrRefused = errors.New("refused")

// lockBackoff bounds the re-read, recompute and retry of a write whose lock was lost (409,
// or 422 from a failed JSON Patch test), as nodepatch's does for the agent.
var lockBackoff = wait.Backoff{Steps: 8, Duration: 20 * time.Millisecond, Factor: 2, Jitter: 0.5}

// lostLock reports a write refused because the node changed since it was read.
func lostLock(err error) bool { return apierrors.IsConflict(err) || apierrors.IsInvalid(err) }

// operation is one RFC 6902 JSON Patch operation.
type operation struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// patchNode writes ops to the node under the plugin's field manager.
func patchNode(ctx context.Context, client Client, name string, ops []operation) (*corev1.Node, error) {
	patch, err := json.Marshal(ops)
	if err != nil {
		return nil, err
	}
	return client.CoreV1().Nodes().Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: wellknown.PluginFieldManager})
}

// setOps sets the keys of want in the string map at path, leaving the others; a map that
// does not exist yet is created whole under a test of the resourceVersion, so a concurrent
// first key is not overwritten.
func setOps(rv, path string, have, want map[string]string) []operation {
	if have == nil {
		return []operation{{Op: "test", Path: "/metadata/resourceVersion", Value: rv}, {Op: "add", Path: path, Value: want}}
	}
	var ops []operation
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if v, ok := have[k]; !ok || v != want[k] {
			ops = append(ops, operation{Op: "add", Path: path + "/" + escape(k), Value: want[k]})
		}
	}
	return ops
}

// escape encodes a map key as a JSON Pointer reference token (RFC 6901).
func escape(key string) string { return strings.NewReplacer("~", "~0", "/", "~1").Replace(key) }

// user names the person the kubeconfig acts as: the API server's answer to a
// SelfSubjectReview (impersonation included), else the kubeconfig context's user entry.
func (o *Options) user(ctx context.Context, client Client) string {
	review, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err == nil && review.Status.UserInfo.Username != "" {
		return review.Status.UserInfo.Username
	}
	if err == nil {
		err = errors.New("no username in the SelfSubjectReview")
	}
	raw, rerr := o.configFlags.loader().RawConfig()
	if rerr == nil {
		ctxName := raw.CurrentContext
		if o.configFlags.overrides.CurrentContext != "" {
			ctxName = o.configFlags.overrides.CurrentContext
		}
		if c, ok := raw.Contexts[ctxName]; ok && c.AuthInfo != "" {
			o.warn(fmt.Sprintf("the API server did not say who you are (%v): recording the kubeconfig's user %q", err, c.AuthInfo))
			return "kubeconfig:" + c.AuthInfo
		}
	}
	o.warn(fmt.Sprintf("the API server did not say who you are (%v), nor did the kubeconfig", err))
	return ""
}

// event records on the node what a person did to it. Its loss is a warning: the node's
// annotations record the release too.
func (o *Options) event(ctx context.Context, client Client, node *corev1.Node, reason wellknown.Reason, action, note string) {
	now := o.now()
	_, err := client.EventsV1().Events(metav1.NamespaceDefault).Create(ctx, &eventsv1.Event{
		// Named as client-go's recorder names Events: the object and the time, in hex.
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", node.Name, now.UnixNano())},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: wellknown.PluginController,
		ReportingInstance:   wellknown.PluginFieldManager,
		Action:              action,
		Reason:              string(reason),
		Type:                corev1.EventTypeWarning,
		Regarding:           corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID},
		Note:                wellknown.Truncate(note, wellknown.MaxMessage),
	}, metav1.CreateOptions{})
	if err != nil {
		o.warn(fmt.Sprintf("could not send the Event %s about node %s: %v", reason, node.Name, err))
	}
}

// released is what a release wrote, or would write under --dry-run.
type released struct {
	node    *corev1.Node
	removed []string
}

// runRelease is `kubectl nodeready release`: one node by name, or every held node the
// selection matches.
func (o *Options) runRelease(ctx context.Context, sel selection, force, dryRun bool) error {
	client, k, err := o.setup(ctx)
	if err != nil {
		return err
	}
	for _, key := range wellknown.HandReleaseAnnotations(k.Label) {
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			return fmt.Errorf("the annotation %s that records a release by hand is not a valid key with the label %s: %s", key, k.Label, strings.Join(errs, "; "))
		}
	}
	user := o.whoAmI(ctx, client)
	at := o.now().UTC().Format(time.RFC3339)
	release := func(name string, force bool) error {
		r, err := o.releaseNode(ctx, client, k, name, user, at, force, dryRun)
		if err != nil {
			return err
		}
		if dryRun {
			fmt.Fprintf(o.streams.Out, "node/%s would be released by hand (dry run, nothing written): would remove %s, label %s=%s and record it as released by %s\n",
				name, orNone(strings.Join(r.removed, ", ")), k.Label, k.LabelValue, orUnknown(user))
			return nil
		}
		what := "removed " + orNone(strings.Join(r.removed, ", "))
		note := fmt.Sprintf("Released by hand by %s with kubectl nodeready release, without verification: %s, labelled %s=%s", orUnknown(user), what, k.Label, k.LabelValue)
		o.event(ctx, client, r.node, wellknown.ReleasedByHand, "Release", note)
		fmt.Fprintf(o.streams.Out, "node/%s released by hand: %s, labelled %s=%s, recorded as released by %s at %s\n",
			name, what, k.Label, k.LabelValue, orUnknown(user), at)
		if k.ExternalTaint && len(r.removed) > 0 && !o.warnedExternal {
			o.warnedExternal = true
			o.warn("TAINT_OWNER is external: the startup taint is another controller's (a NodeReadinessRule), which may put it back while nodeready's condition is not True")
		}
		return nil
	}
	if sel.name != "" {
		return release(sel.name, force)
	}
	// A fleet-wide release takes the held nodes only: one that carries no startup taint
	// is left as it is, never labelled.
	return o.eachNode(ctx, client, sel, "release", "released", dryRun, func(node *corev1.Node) string {
		if len(k.startupTaints(node)) == 0 {
			return "not held: it carries no startup taint (" + string(judge(k, node).state) + ")"
		}
		return ""
	}, func(node *corev1.Node) error { return release(node.Name, false) })
}

// releaseNode releases one node by hand, or with dryRun works out what it would write.
func (o *Options) releaseNode(ctx context.Context, client Client, k Keys, name, user, at string, force, dryRun bool) (released, error) {
	var r released
	err := retry.OnError(lockBackoff, lostLock, func() error {
		node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get node %s: %w", name, err)
		}
		j := judge(k, node)
		switch {
		case len(j.taints) == 0 && j.labelled:
			return fmt.Errorf("%w: node %s is released already (%s=%s, no startup taint: %s)", ErrRefused, name, k.Label, j.label, j.state)
		case len(j.taints) == 0 && !force:
			return fmt.Errorf("%w: node %s is not held: it carries no startup taint (%s; state %s). --force labels it anyway, so an agent checking it leaves",
				ErrRefused, name, taintNames(k), j.state)
		case unregistered(node) && !force:
			// As the agent waits for it (nodepatch.ErrNotRegistered): Karpenter merges its
			// startupTaints into the node when it registers it, and the label keeps the agent
			// that would remove them away.
			return fmt.Errorf("%w: node %s is Karpenter's and not registered yet (no %s=true): Karpenter puts its startupTaints back when it registers the node, and no agent would be left to remove them. Wait for the registration, or --force",
				ErrRefused, name, karpenterRegistered)
		}
		kept := slices.DeleteFunc(slices.Clone(node.Spec.Taints), k.isStartupTaint)
		r = released{node: node, removed: j.taints}
		var ops []operation
		if len(kept) < len(node.Spec.Taints) {
			// spec.taints is an atomic list: replaced whole, under a test of the whole list
			// as read, so a taint another writer added or changed since is never lost.
			ops = append(ops,
				operation{Op: "test", Path: "/spec/taints", Value: node.Spec.Taints},
				operation{Op: "replace", Path: "/spec/taints", Value: kept})
		}
		ops = append(ops, setOps(node.ResourceVersion, "/metadata/labels", node.Labels, map[string]string{k.Label: k.LabelValue})...)
		ops = append(ops, setOps(node.ResourceVersion, "/metadata/annotations", node.Annotations, map[string]string{
			wellknown.ReleasedByAnnotation(k.Label):     user,
			wellknown.ReleasedByTimeAnnotation(k.Label): at,
		})...)
		if dryRun {
			return nil
		}
		if r.node, err = patchNode(ctx, client, name, ops); err != nil {
			return fmt.Errorf("release node %s: %w", name, err)
		}
		return nil
	})
	return r, err
}

// Karpenter's node labels: a node with the first is Karpenter-managed, and Karpenter sets the
// second once it has registered the node.
const (
	karpenterNodePool   = "karpenter.sh/nodepool"
	karpenterRegistered = "karpenter.sh/registered"
)

// unregistered reports a Karpenter node that Karpenter has not registered yet.
func unregistered(node *corev1.Node) bool {
	_, managed := node.Labels[karpenterNodePool]
	return managed && node.Labels[karpenterRegistered] != "true"
}

// taintNames lists the startup taints by key and effect.
func taintNames(k Keys) string {
	names := make([]string, len(k.Taints))
	for i, t := range k.Taints {
		names[i] = t.Key + ":" + string(t.Effect)
	}
	return strings.Join(names, ", ")
}

// runReverify is `kubectl nodeready reverify`: one node by name, or every labelled node
// the selection matches.
func (o *Options) runReverify(ctx context.Context, sel selection, force, dryRun bool) error {
	client, k, err := o.setup(ctx)
	if err != nil {
		return err
	}
	if sel.name != "" {
		node, err := client.CoreV1().Nodes().Get(ctx, sel.name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get node %s: %w", sel.name, err)
		}
		if _, ok := node.Labels[k.Label]; !ok {
			return fmt.Errorf("%w: node %s has no label %s: nothing to re-verify (state %s)", ErrRefused, sel.name, k.Label, judge(k, node).state)
		}
		if !force {
			pods, err := o.agentPods(ctx, client, sel.name)
			if err != nil {
				return err
			}
			if err := agentStillRuns(sel.name, pods); err != nil {
				return err
			}
		}
		return o.reverifyNode(ctx, client, k, sel.name, dryRun)
	}
	// One LIST of the agent pods for the fleet: a node where one still runs is left as it
	// is, as a single reverify refuses it without --force.
	pods, err := o.agentPods(ctx, client, "")
	if err != nil {
		return err
	}
	return o.eachNode(ctx, client, sel, "re-verify", "unlabelled for re-verification", dryRun, func(node *corev1.Node) string {
		if _, ok := node.Labels[k.Label]; !ok {
			return fmt.Sprintf("no label %s: nothing to re-verify (%s)", k.Label, judge(k, node).state)
		}
		if err := agentStillRuns(node.Name, pods); err != nil {
			return strings.TrimPrefix(err.Error(), ErrRefused.Error()+": ")
		}
		return ""
	}, func(node *corev1.Node) error { return o.reverifyNode(ctx, client, k, node.Name, dryRun) })
}

// agentStillRuns refuses a node where an agent pod still runs.
func agentStillRuns(name string, pods map[string][]AgentPod) error {
	if p := pods[name]; len(p) > 0 {
		return fmt.Errorf("%w: the agent pod %s/%s still runs on node %s: within its SETTLE_TIME after a release it puts a removed label back. Run this again once it is gone, or with --force",
			ErrRefused, p[0].Namespace, p[0].Name, name)
	}
	return nil
}

// reverifyNode removes one node's label, or with dryRun says what it would remove.
func (o *Options) reverifyNode(ctx context.Context, client Client, k Keys, name string, dryRun bool) error {
	var (
		node    *corev1.Node
		value   string
		records []string
	)
	err := retry.OnError(lockBackoff, lostLock, func() error {
		var err error
		if node, err = client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("get node %s: %w", name, err)
		}
		var ok bool
		if value, ok = node.Labels[k.Label]; !ok {
			return fmt.Errorf("%w: node %s has no label %s: nothing to re-verify (state %s)", ErrRefused, name, k.Label, judge(k, node).state)
		}
		// The test makes the removal one of the label as read: a label another writer
		// changed meanwhile is read again, not removed blind.
		ops := []operation{
			{Op: "test", Path: "/metadata/labels/" + escape(k.Label), Value: value},
			{Op: "remove", Path: "/metadata/labels/" + escape(k.Label)},
		}
		records = nil
		for _, a := range wellknown.HandReleaseAnnotations(k.Label) {
			if _, ok := node.Annotations[a]; ok {
				ops = append(ops, operation{Op: "remove", Path: "/metadata/annotations/" + escape(a)})
				records = append(records, a)
			}
		}
		if dryRun {
			return nil
		}
		if node, err = patchNode(ctx, client, name, ops); err != nil {
			return fmt.Errorf("remove the label %s of node %s: %w", k.Label, name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if dryRun {
		fmt.Fprintf(o.streams.Out, "node/%s would lose its label %s=%s%s (dry run, nothing written). %s\n",
			name, k.Label, value, prefixed(" and the record of a release by hand ", strings.Join(records, ", ")), reverifyNote(k, node))
		return nil
	}
	fmt.Fprintf(o.streams.Out, "node/%s: label %s removed, the DaemonSet runs an agent there again. %s\n", name, k.Label, reverifyNote(k, node))
	return nil
}

// reverifyNote says what the installed configuration does while the node is checked again.
func reverifyNote(k Keys, node *corev1.Node) string {
	_, verifiedBefore := node.Annotations[wellknown.ReleasedAtAnnotation(k.Label)]
	switch {
	case k.ReverifyTaint && verifiedBefore:
		return fmt.Sprintf("REVERIFY_TAINT is true and nodeready verified this node before (%s): the agent puts the startup taint back first, so no new workloads land there until it is verified", wellknown.ReleasedAtAnnotation(k.Label))
	case k.ReverifyTaint:
		return fmt.Sprintf("REVERIFY_TAINT is true, but nodeready never verified this node (no %s): it is checked untainted, as a node that predates the install", wellknown.ReleasedAtAnnotation(k.Label))
	}
	return "REVERIFY_TAINT is false: the node stays schedulable while it is checked"
}
