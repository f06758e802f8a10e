package checks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/nodeready/nodeready/internal/envvar"
	"github.com/nodeready/nodeready/internal/kube"
)

var _ Check = (*DaemonSets)(nil)

// DaemonSets passes when every required DaemonSet has a Ready pod (condition
// Ready True, not just Running) on the node.
//
// The required DaemonSets are a fixed list, or discovered in every round as
// the DaemonSet controller would place them: every DaemonSet whose pod
// template's nodeName, nodeSelector, required node affinity (matchExpressions
// and matchFields) and tolerations, with the tolerations the controller adds
// to every DaemonSet pod, admit the node as it is now. A DaemonSet that does
// not tolerate one of the node's NoSchedule or NoExecute taints, the startup
// taint included, gets no pod before the release, so waiting for it could
// never end: it is not required. A DaemonSet that stops matching the node
// once the node carries the verified label runs only on unverified nodes,
// like nodeready's own DaemonSet with its `DoesNotExist` affinity: it is not
// required either.
//
// It is one check, not one per DaemonSet, because discovery happens in every
// round: the set can change while the node waits (a DaemonSet created,
// relabelled or deleted). A round costs one node GET, one DaemonSet LIST in
// discovery (one GET per DaemonSet when they are listed by name), and one pod
// LIST per namespace of the required DaemonSets. The error names every
// DaemonSet that is not ready, so one line shows all that holds the node.
type DaemonSets struct {
	client   kube.Interface
	nodeName string
	opts     DaemonSetsWant
}

// DaemonSetsWant says which DaemonSets are required.
type DaemonSetsWant struct {
	// Names lists the required DaemonSets as "namespace/name". Empty means
	// discovery.
	Names []string
	// Selector limits discovery to DaemonSets with matching labels; nil
	// means every DaemonSet.
	Selector labels.Selector
	// Exclude lists DaemonSets, as "namespace/name", that discovery leaves
	// out.
	Exclude []string
	// VerifiedLabel and VerifiedLabelValue are the label the release adds.
	// A DaemonSet that stops matching the node once it has that label is not
	// required. An empty VerifiedLabel turns this rule off.
	VerifiedLabel, VerifiedLabelValue string
}

// NewDaemonSets returns a check of the DaemonSets opts names or discovers on
// the node nodeName.
func NewDaemonSets(client kube.Interface, nodeName string, opts DaemonSetsWant) *DaemonSets {
	return &DaemonSets{client: client, nodeName: nodeName, opts: opts}
}

// Name implements Check.
func (c *DaemonSets) Name() string { return string(NameDaemonSets) }

// Target implements Check: the listed DaemonSets, or what discovery covers.
func (c *DaemonSets) Target() string {
	switch {
	case len(c.opts.Names) > 0:
		return strings.Join(c.opts.Names, ",")
	case c.opts.Selector != nil && !c.opts.Selector.Empty():
		return c.opts.Selector.String()
	default:
		return "all"
	}
}

// daemonSetEntry is one required DaemonSet, or one that was named and cannot
// be waited for, with what stands in the way.
type daemonSetEntry struct {
	key     string // namespace/name
	ds      *appsv1.DaemonSet
	problem string
	// misconfigured: the problem is the configuration's, not the node's (a named
	// DaemonSet that does not exist, or does not run on the node for a reason
	// other than a label the node lacks).
	misconfigured bool
}

// Run implements Check.
func (c *DaemonSets) Run(ctx context.Context) error {
	node, err := getNode(ctx, c.client, c.nodeName)
	if err != nil {
		return err
	}
	var entries []daemonSetEntry
	if len(c.opts.Names) > 0 {
		entries, err = c.named(ctx, node)
	} else {
		entries, err = c.discover(ctx, node)
	}
	if err != nil {
		return err
	}
	if slices.ContainsFunc(entries, func(e daemonSetEntry) bool { return e.ds != nil }) {
		if err := c.checkPods(ctx, node.Name, entries); err != nil {
			return err
		}
	}
	var problems []string
	misconfigured := false
	for _, e := range entries {
		if e.problem != "" {
			problems = append(problems, "daemonset "+e.key+": "+e.problem)
			misconfigured = misconfigured || e.misconfigured
		}
	}
	switch {
	case len(problems) == 0:
		return nil
	case misconfigured:
		// The node may have DaemonSets not ready too; what no node could pass comes
		// first in whose fault it is.
		return Misconfiguration(errors.New(strings.Join(problems, "; ")))
	}
	return errors.New(strings.Join(problems, "; "))
}

// named resolves the listed DaemonSets, in their order. One that does not
// exist or does not run on the node is a problem, not a reason to skip it:
// it was named as required.
func (c *DaemonSets) named(ctx context.Context, node *corev1.Node) ([]daemonSetEntry, error) {
	verified := c.verifiedNode(node)
	entries := make([]daemonSetEntry, 0, len(c.opts.Names))
	for _, key := range c.opts.Names {
		ns, name, _ := strings.Cut(key, "/")
		ds, err := c.client.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			entries = append(entries, daemonSetEntry{key: key, problem: "not found", misconfigured: true})
		case err != nil:
			return nil, fmt.Errorf("get daemonset %s: %w", key, gateError(err, "daemonsets"))
		default:
			e := daemonSetEntry{key: key, ds: ds}
			if why := notRunning(ds, node, verified); why != "" {
				e.ds, e.problem, e.misconfigured = nil, "does not run on "+node.Name+": "+why, true
				if keys := lacking(ds, node); len(keys) > 0 {
					// Named as required, and kept off only by labels the node
					// should have (a GPU feature label not published, say): the
					// node's fault, as a node agent that is not ready would be.
					e.problem = fmt.Sprintf("does not run on %s: the node lacks the label %s that its node selector or required node affinity asks for",
						node.Name, strings.Join(keys, ", "))
					e.misconfigured = false
				}
			}
			entries = append(entries, e)
		}
	}
	return entries, nil
}

// discover lists the DaemonSets that match the selector and keeps those the
// controller runs on the node now and after the release, sorted by
// namespace/name.
func (c *DaemonSets) discover(ctx context.Context, node *corev1.Node) ([]daemonSetEntry, error) {
	var opts metav1.ListOptions
	if c.opts.Selector != nil {
		opts.LabelSelector = c.opts.Selector.String()
	}
	list, err := c.client.AppsV1().DaemonSets(metav1.NamespaceAll).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("list daemonsets: %w", gateError(err, "daemonsets"))
	}
	verified := c.verifiedNode(node)
	var entries []daemonSetEntry
	for i := range list.Items {
		ds := &list.Items[i]
		key := ds.Namespace + "/" + ds.Name
		if ds.DeletionTimestamp != nil || slices.Contains(c.opts.Exclude, key) || notRunning(ds, node, verified) != "" {
			continue
		}
		entries = append(entries, daemonSetEntry{key: key, ds: ds})
	}
	slices.SortFunc(entries, func(a, b daemonSetEntry) int { return strings.Compare(a.key, b.key) })
	return entries, nil
}

// checkPods lists the pods on the node and records, for every required
// DaemonSet, why none of its pods is Ready. A DaemonSet's pods live in its
// namespace, so the pods are listed only there, once per namespace: the pod
// reads can then be granted by Roles in those namespaces alone. RBAC cannot
// restrict a list to a field selector, but the request always carries one:
// the API server returns only the pods of this node.
func (c *DaemonSets) checkPods(ctx context.Context, nodeName string, entries []daemonSetEntry) error {
	var namespaces []string
	for _, e := range entries {
		if e.ds != nil && !slices.Contains(namespaces, e.ds.Namespace) {
			namespaces = append(namespaces, e.ds.Namespace)
		}
	}
	slices.Sort(namespaces)
	selector := fields.OneTermEqualSelector("spec.nodeName", nodeName).String()
	byOwner := map[types.UID][]*corev1.Pod{}
	for _, ns := range namespaces {
		pods, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: selector})
		if err != nil {
			return fmt.Errorf("list pods on %s in %s: %w", nodeName, ns, gateError(err, "daemonsets"))
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			ref := metav1.GetControllerOf(p)
			if p.Spec.NodeName != nodeName || ref == nil || ref.Kind != "DaemonSet" {
				continue
			}
			byOwner[ref.UID] = append(byOwner[ref.UID], p)
		}
	}
	for i := range entries {
		if e := &entries[i]; e.ds != nil {
			e.problem = notReady(byOwner[e.ds.UID], nodeName)
		}
	}
	return nil
}

// verifiedNode is node as it will be after the release, or nil when the
// verified label is not known.
func (c *DaemonSets) verifiedNode(node *corev1.Node) *corev1.Node {
	if c.opts.VerifiedLabel == "" {
		return nil
	}
	v := node.DeepCopy()
	if v.Labels == nil {
		v.Labels = map[string]string{}
	}
	v.Labels[c.opts.VerifiedLabel] = c.opts.VerifiedLabelValue
	return v
}

// notRunning says why the DaemonSet controller does not run a pod of ds on
// node now, or would stop once the node looks like verified (when not nil),
// or returns "" when it runs one in both.
func notRunning(ds *appsv1.DaemonSet, node, verified *corev1.Node) string {
	if why := placement(ds, node); why != "" {
		return why
	}
	if verified != nil && placement(ds, verified) != "" {
		return "it runs only on unverified nodes (its node selector or affinity excludes the verified label)"
	}
	return ""
}

// placement applies the DaemonSet controller's predicates
// (NodeShouldRunDaemonPod): the template's nodeName, its nodeSelector and
// required node affinity, and its tolerations plus those the controller adds,
// against the node's NoSchedule and NoExecute taints. It returns why the
// controller places no pod on node, or "".
func placement(ds *appsv1.DaemonSet, node *corev1.Node) string {
	spec := &ds.Spec.Template.Spec
	if spec.NodeName != "" && spec.NodeName != node.Name {
		return "its pod template names node " + spec.NodeName
	}
	// Parse errors count as no match, as in the controller.
	if ok, _ := nodeaffinity.GetRequiredNodeAffinity(&corev1.Pod{Spec: *spec}).Match(node); !ok {
		return "its node selector or required node affinity does not match"
	}
	tolerations := append(slices.Clone(spec.Tolerations), daemonPodTolerations(spec.HostNetwork)...)
	taint, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logr.Discard(), node.Spec.Taints, tolerations,
		func(t *corev1.Taint) bool {
			return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
		},
		false, // the alpha Lt/Gt toleration operators: off by default, never matched here
	)
	if untolerated {
		return "it does not tolerate the taint " + taint.ToString()
	}
	return ""
}

// lacking returns the keys of the labels node lacks that are all that keeps ds
// from placing a pod on it: labelled with them (with values ds accepts), the
// node would match ds's node selector and one term of its required node
// affinity, and nothing else (the pod template's nodeName, a taint not
// tolerated) would keep ds off. It returns nil when a label the node has with
// another value, a field, or anything else keeps ds off: the configuration
// names a DaemonSet that does not run on such nodes.
func lacking(ds *appsv1.DaemonSet, node *corev1.Node) []string {
	spec := ds.Spec.Template.Spec
	var keys []string
	for k, v := range spec.NodeSelector {
		have, ok := node.Labels[k]
		switch {
		case !ok:
			keys = append(keys, k)
		case have != v:
			return nil
		}
	}
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		var best []string
		found := false
		for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			if missing, ok := termLacking(term, node); ok && (!found || len(missing) < len(best)) {
				best, found = missing, true
			}
		}
		if !found {
			return nil
		}
		for _, k := range best {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	if len(keys) == 0 {
		return nil
	}
	// The rest of the placement, with the selector and the affinity met.
	placed := ds.DeepCopy()
	placed.Spec.Template.Spec.NodeSelector, placed.Spec.Template.Spec.Affinity = nil, nil
	if placement(placed, node) != "" {
		return nil
	}
	slices.Sort(keys)
	return keys
}

// termLacking returns the keys of the labels node lacks that term asks for, when
// every other requirement of term holds for node (ok), so that labelling the node
// would match the term. An empty term matches no node.
func termLacking(term corev1.NodeSelectorTerm, node *corev1.Node) (keys []string, ok bool) {
	if len(term.MatchExpressions)+len(term.MatchFields) == 0 {
		return nil, false
	}
	if len(term.MatchFields) > 0 {
		only := corev1.NodeSelectorTerm{MatchFields: term.MatchFields}
		if matched, _ := nodeaffinity.NewLazyErrorNodeSelector(&corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{only}}).Match(node); !matched {
			return nil, false
		}
	}
	for _, req := range term.MatchExpressions {
		if _, has := node.Labels[req.Key]; !has {
			switch req.Operator {
			case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpExists, corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
				keys = append(keys, req.Key) // a label would meet it
			}
			continue // NotIn and DoesNotExist hold without the label
		}
		one := corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{req}}
		if matched, _ := nodeaffinity.NewLazyErrorNodeSelector(&corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{one}}).Match(node); !matched {
			return nil, false
		}
	}
	return keys, true
}

// daemonPodTolerations are the tolerations the DaemonSet controller adds to
// every pod it creates (AddOrUpdateDaemonPodTolerations in
// k8s.io/kubernetes/pkg/controller/daemon/util).
func daemonPodTolerations(hostNetwork bool) []corev1.Toleration {
	exists := func(key string, effect corev1.TaintEffect) corev1.Toleration {
		return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: effect}
	}
	t := []corev1.Toleration{
		exists(corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute),
		exists(corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute),
		exists(corev1.TaintNodeDiskPressure, corev1.TaintEffectNoSchedule),
		exists(corev1.TaintNodeMemoryPressure, corev1.TaintEffectNoSchedule),
		exists(corev1.TaintNodePIDPressure, corev1.TaintEffectNoSchedule),
		exists(corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule),
	}
	if hostNetwork {
		t = append(t, exists(corev1.TaintNodeNetworkUnavailable, corev1.TaintEffectNoSchedule))
	}
	return t
}

// notReady returns "" when one of pods is Ready, and otherwise what a person
// needs to know: "no pod on node-a", or "no Ready pod on node-a (1 pod,
// Running, not Ready)".
func notReady(pods []*corev1.Pod, nodeName string) string {
	if len(pods) == 0 {
		return "no pod on " + nodeName
	}
	states := make([]string, 0, len(pods))
	for _, p := range pods {
		if podReady(p) {
			return ""
		}
		states = append(states, podState(p))
	}
	if len(pods) == 1 {
		return fmt.Sprintf("no Ready pod on %s (1 pod, %s)", nodeName, states[0])
	}
	return fmt.Sprintf("no Ready pod on %s (%d pods: %s)", nodeName, len(pods), strings.Join(states, "; "))
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podState is "Running, not Ready", with "terminating" and the first reason a
// container is waiting for when there are such.
func podState(p *corev1.Pod) string {
	phase := p.Status.Phase
	if phase == "" {
		phase = corev1.PodPending
	}
	parts := []string{string(phase), "not Ready"}
	if p.DeletionTimestamp != nil {
		parts = append(parts, "terminating")
	}
	for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			parts = append(parts, cs.Name+" "+w.Reason)
			break
		}
	}
	return strings.Join(parts, ", ")
}

// DaemonSetsOptions are the daemonsets gate's variables.
type DaemonSetsOptions struct {
	Names    envvar.List `envconfig:"DAEMONSETS" desc:"daemonsets: namespace/name of the DaemonSets that must have a Ready pod on the node; empty to discover every DaemonSet that runs on the node before and after the release"`
	Selector string      `envconfig:"DAEMONSETS_SELECTOR" desc:"daemonsets: label selector that limits discovery, such as tier=node; empty for every DaemonSet"`
	Exclude  envvar.List `envconfig:"DAEMONSETS_EXCLUDE" desc:"daemonsets: namespace/name of DaemonSets that discovery leaves out"`

	// Selection is DAEMONSETS_SELECTOR as Validate read it.
	Selection labels.Selector `ignored:"true"`
}

// Validate implements KindOptions.
func (o *DaemonSetsOptions) Validate(*Options, Use) (err error) {
	for _, key := range o.Names {
		if err := envvar.NamespacedName("DAEMONSETS", key); err != nil {
			return err
		}
	}
	if o.Selection, err = labels.Parse(o.Selector); err != nil {
		return &envvar.Error{Var: "DAEMONSETS_SELECTOR", Value: o.Selector, Accepted: "not a label selector: use a form such as tier=node, app in (cni,csi) or !example.com/optional"}
	}
	if o.Selector != "" && len(o.Names) > 0 {
		return &envvar.Error{Var: "DAEMONSETS_SELECTOR", Value: o.Selector, Accepted: "limits discovery only: leave it empty when DAEMONSETS lists the DaemonSets"}
	}
	for _, key := range o.Exclude {
		if err := envvar.NamespacedName("DAEMONSETS_EXCLUDE", key); err != nil {
			return err
		}
	}
	if len(o.Exclude) > 0 && len(o.Names) > 0 {
		return &envvar.Error{Var: "DAEMONSETS_EXCLUDE", Value: o.Exclude.String(), Accepted: "limits discovery only: leave it empty when DAEMONSETS lists the DaemonSets"}
	}
	return nil
}

// Checks implements KindOptions: one check of every DaemonSet, listed or discovered.
func (o *DaemonSetsOptions) Checks(_ *Options, env Env) []Check {
	ds := NewDaemonSets(env.Client, env.Node, DaemonSetsWant{
		Names:              o.Names,
		Selector:           o.Selection,
		Exclude:            o.Exclude,
		VerifiedLabel:      env.VerifiedLabel,
		VerifiedLabelValue: env.VerifiedLabelValue,
	})
	if why := env.noAPI(); why != "" {
		return []Check{Skip(NameDaemonSets, ds.Target(), why)}
	}
	return []Check{ds}
}
