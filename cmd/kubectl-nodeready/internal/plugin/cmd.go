// Package plugin is `kubectl nodeready`: every node as nodeready sees it (status), why one
// is held (why), and the two things a person may do by hand, releasing a held node
// (release, break-glass) and asking for its verification again (reverify). It reads the
// installed configuration for the startup taints and the verified label, so renamed keys
// work, and writes the node as the agent does: one JSON Patch, the taint list under a test.
package plugin

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// Defaults of where nodeready is installed: the namespace of manifests/ and of the chart's
// documented install, the name of its objects, its ConfigMap and the label of its agent pods.
const (
	DefaultNamespace     = "kube-system"
	DefaultName          = "nodeready"
	DefaultConfigMap     = "nodeready-config"
	DefaultAgentSelector = "app.kubernetes.io/name=nodeready"
)

// Options are the plugin's flags and what its commands work with.
type Options struct {
	streams     genericiooptions.IOStreams
	configFlags *kubeconfigFlags
	printFlags  *outputFlags
	// nsFlag tells a --namespace given from the kubeconfig's namespace, which is not where
	// nodeready is installed.
	nsFlag        func() bool
	keys          keyFlags
	agentSelector string
	// name is --name, the name the install gave its objects; nameFlags tells which of the
	// flags it sets were given, which win over it.
	name      string
	nameFlags func() (name, configMap, agentSelector bool)
	// verbosity is -v: 1 and up tell what the plugin read and left, 6 and up the API
	// requests (client-go's, as kubectl's -v does).
	verbosity int
	// warnedExternal: the warning of TAINT_OWNER=external is given once per command.
	warnedExternal bool

	// newClient, now and whoAmI are the cluster, the clock and the user; tests replace them.
	newClient func() (Client, error)
	now       func() time.Time
	whoAmI    func(ctx context.Context, client Client) string
}

// NewCommand returns `kubectl nodeready` writing to streams; version is printed by
// --version.
func NewCommand(streams genericiooptions.IOStreams, version string) *cobra.Command {
	o := &Options{
		streams:     streams,
		configFlags: newKubeconfigFlags(),
		now:         time.Now,
	}
	o.newClient = func() (Client, error) {
		cfg, err := o.configFlags.restConfig()
		if err != nil {
			return nil, err
		}
		cfg.UserAgent = "kubectl-nodeready/" + version
		return newClientFor(cfg)
	}
	o.whoAmI = o.user
	return o.command(version)
}

func (o *Options) command(version string) *cobra.Command {
	// Not -o name: a node's name alone says nothing of its state.
	o.printFlags = newOutputFlags()
	status := &cobra.Command{
		Use:   "status",
		Short: "Every node as nodeready sees it: held, verified, failed open, re-verifying, released by hand, not managed",
		Long: `Every node as nodeready sees it, from its startup taint, its verified label, the
annotations of its release and nodeready's condition node-ready/Verified: its state, since
when, and why (the condition's reason and message), then a summary line of the fleet.

It reads the nodes with one LIST; -o wide adds the startup taints, the label's value, the
verification's duration, who released a node by hand, and the agent pods (one more LIST);
-o json and -o yaml print all of it in a stable form (apiVersion nodeready.io/v1alpha1,
kind FleetStatus), times in RFC 3339.

--watch keeps watching the nodes (one watch, resumed where it left off) and prints a node's
row again when its state, reason or message changes, then the summary when it changes.`,
		Example: `  kubectl nodeready
  kubectl nodeready status -o wide
  kubectl nodeready status --watch
  kubectl nodeready status -l karpenter.sh/nodepool=default -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			watch, _ := cmd.Flags().GetBool("watch")
			return o.runStatus(cmd.Context(), cmd.Flag("selector").Value.String(), watch)
		},
	}
	status.Flags().StringP("selector", "l", "", "only the nodes that match this label selector, such as karpenter.sh/nodepool=default")
	status.Flags().BoolP("watch", "w", false, "after the table, watch the nodes and print a node's row again when its state, reason or message changes, and the summary when it changes")
	o.printFlags.addFlags(status)
	// The table's wide form is the plugin's own, not a printer of cli-runtime's.
	status.Flag("output").Usage = "Output format: wide, json, yaml, jsonpath=..., go-template=... (default: a table)"

	why := &cobra.Command{
		Use:   "why NODE",
		Short: "Why a node is where it is: nodeready's condition, its latest Events and the agent pod on the node",
		Long: `The node's state as status tells it, nodeready's condition node-ready/Verified in full,
the latest Events nodeready sent about the node (the agent's CheckFailed, VerificationFailed,
ReleaseFailed and the others, each with its note; a release by hand; a release at
uninstall), and the agent pod on the node (phase, restarts), with what to do next.

-o json and -o yaml print the same in a stable form (apiVersion nodeready.io/v1alpha1,
kind NodeReport), times in RFC 3339.`,
		Example: `  kubectl nodeready why ip-10-0-1-23.ec2.internal
  kubectl nodeready why ip-10-0-1-23.ec2.internal -o json`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completeNodes(func(Keys, *corev1.Node) bool { return true }),
		RunE: func(cmd *cobra.Command, args []string) error {
			events, _ := cmd.Flags().GetInt("events")
			output, _ := cmd.Flags().GetString("output")
			return o.runWhy(cmd.Context(), args[0], events, output)
		},
	}
	why.Flags().Int("events", 10, "how many of the latest Events to show")
	why.Flags().StringP("output", "o", "", "Output format: json or yaml (default: for people)")

	release := &cobra.Command{
		Use:   "release (NODE | -l SELECTOR | --all)",
		Short: "Break-glass: release a held node, or every held node of a selector, by hand, unverified",
		Long: `Releases a node that nodeready holds, without its verification: removes its startup
taints (every other taint stays), sets the verified label to VERIFIED_LABEL_VALUE so the
DaemonSet takes its agent away, and records who released it and when in the annotations
<label>-released-by and <label>-released-at, in one JSON Patch whose test of the taint list
keeps another writer's change. It sends a Warning Event ReleasedByHand about the node.

It refuses a node that carries no startup taint (nothing holds it), and a Karpenter node
that Karpenter has not registered yet (it would put its startupTaints back), unless --force.
It never writes a node that already has the label and no startup taint.

With -l SELECTOR or --all instead of a name, it releases every held node among those (one
LIST, then each node as above, recorded alike) and leaves the others as they are: a node
without a startup taint, and a Karpenter node not registered yet (--force takes a name
only). --dry-run prints what would change and writes nothing.`,
		Example: `  kubectl nodeready release ip-10-0-1-23.ec2.internal
  kubectl nodeready release -l karpenter.sh/nodepool=default --dry-run
  kubectl nodeready release --all`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: o.completeNodes(func(k Keys, n *corev1.Node) bool { return len(k.startupTaints(n)) > 0 }),
		RunE: func(cmd *cobra.Command, args []string) error {
			sel, err := selectionOf(cmd, args)
			if err != nil {
				return err
			}
			force, _ := cmd.Flags().GetBool("force")
			dryRun, _ := cmd.Flags().GetBool("dry-run")
			return o.runRelease(cmd.Context(), sel, force, dryRun)
		},
	}
	release.Flags().Bool("force", false, "release a node that carries no startup taint, or a Karpenter node not registered yet, too (a named node only)")
	addSelectionFlags(release, "release")

	reverify := &cobra.Command{
		Use:   "reverify (NODE | -l SELECTOR | --all)",
		Short: "Verify a node, or the nodes of a selector, again: remove the verified label so the DaemonSet runs an agent there",
		Long: `Removes the node's verified label (and the record of a release by hand), so the node
matches the DaemonSet's node affinity again and an agent checks it. With REVERIFY_TAINT=true
in the installed configuration the agent first puts the startup taint back, but only on a
node nodeready verified before (it carries <label>-at): no new workloads land there while it
is checked. Otherwise the node stays schedulable meanwhile.

It refuses a node without the label, and one where an agent pod still runs (within its
SETTLE_TIME after a release that agent puts a removed label back), unless --force.

With -l SELECTOR or --all instead of a name, it removes the label of every labelled node
among those where no agent pod runs, and leaves the others as they are (--force takes a
name only). With REVERIFY_TAINT=true each of them is tainted again while it is checked:
choose a few nodes at a time. --dry-run prints what would change and writes nothing.`,
		Example: `  kubectl nodeready reverify ip-10-0-1-23.ec2.internal
  kubectl nodeready reverify -l node-ready/verified=failed-open --dry-run`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: o.completeNodes(func(k Keys, n *corev1.Node) bool { _, ok := n.Labels[k.Label]; return ok }),
		RunE: func(cmd *cobra.Command, args []string) error {
			sel, err := selectionOf(cmd, args)
			if err != nil {
				return err
			}
			force, _ := cmd.Flags().GetBool("force")
			dryRun, _ := cmd.Flags().GetBool("dry-run")
			return o.runReverify(cmd.Context(), sel, force, dryRun)
		},
	}
	reverify.Flags().Bool("force", false, "remove the label even while an agent pod runs on the node (a named node only)")
	addSelectionFlags(reverify, "re-verify")

	root := &cobra.Command{
		Use:   "kubectl-nodeready",
		Short: "Every node as nodeready sees it, why one is held, and release or re-verify it by hand",
		Long: `kubectl nodeready shows where each node stands with nodeready (status, the default),
why one is held (why), and does what a person may do by hand: release a held node
(release, break-glass) or verify one again (reverify).

The startup taints and the verified label are read from nodeready's ConfigMap
(--namespace, default kube-system; --config-map, default nodeready-config), so renamed keys
work; --taint-key and --label override them. An install whose objects have another name
(the chart's nameOverride) is found with --name: its ConfigMap NAME-config and its agent
pods app.kubernetes.io/name=NAME.`,
		Version:       version,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl nodeready"},
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE:          status.RunE,
	}
	// `kubectl nodeready` alone is `status`: its flags work there too.
	root.Flags().AddFlagSet(status.Flags())
	// -v is kubectl's verbosity: the version has no shorthand.
	root.Flags().Bool("version", false, "print the plugin's version")
	root.PersistentFlags().IntVarP(&o.verbosity, "v", "v", 0, "verbosity: 1 tells what the plugin read (the keys, nodes it leaves as they are), 6 and up log the API requests as kubectl's -v does")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if err := o.setName(); err != nil {
			return err
		}
		return o.setVerbosity()
	}
	// Completion goes through kubectl (a kubectl_complete-nodeready on the PATH calls
	// `kubectl-nodeready __complete`), not through a completion script of the plugin's own.
	root.CompletionOptions.DisableDefaultCmd = true
	root.AddCommand(status, why, release, reverify)
	o.configFlags.addFlags(root.PersistentFlags())
	root.PersistentFlags().Lookup("namespace").Usage = "where nodeready is installed: its ConfigMap and agent pods (default " + DefaultNamespace + ")"
	o.nsFlag = func() bool { return root.PersistentFlags().Lookup("namespace").Changed }
	root.PersistentFlags().StringVar(&o.keys.configMap, "config-map", DefaultConfigMap, "nodeready's ConfigMap, read for the startup taints and the verified label")
	root.PersistentFlags().StringVar(&o.keys.taintKey, "taint-key", "", "the startup taint's key (TAINT_KEY), over the ConfigMap's")
	root.PersistentFlags().StringVar(&o.keys.label, "label", "", "the verified label (VERIFIED_LABEL), over the ConfigMap's")
	root.PersistentFlags().StringVar(&o.agentSelector, "agent-selector", DefaultAgentSelector, "the label selector of the agent pods")
	root.PersistentFlags().StringVar(&o.name, "name", DefaultName, "the name of nodeready's objects (the chart's nameOverride): the ConfigMap NAME-config and the agent pods app.kubernetes.io/name=NAME, unless --config-map or --agent-selector say otherwise")
	o.nameFlags = func() (bool, bool, bool) {
		f := root.PersistentFlags()
		return f.Lookup("name").Changed, f.Lookup("config-map").Changed, f.Lookup("agent-selector").Changed
	}
	return root
}

// namespace is where nodeready is installed.
func (o *Options) namespace() string {
	if o.nsFlag != nil && o.nsFlag() && o.configFlags.overrides.Context.Namespace != "" {
		return o.configFlags.overrides.Context.Namespace
	}
	return DefaultNamespace
}

// setup returns the client and the keys, warnings on stderr.
func (o *Options) setup(ctx context.Context) (Client, Keys, error) {
	client, err := o.newClient()
	if err != nil {
		return nil, Keys{}, err
	}
	f := o.keys
	f.namespace = o.namespace()
	k, err := readKeys(ctx, client, f, o.warn)
	if err == nil {
		o.logf(1, "Judging nodes by %s: startup taints %s, verified label %s=%s", k.Source, taintNames(k), k.Label, k.LabelValue)
	}
	return client, k, err
}

// setupNode is setup for a command about one node, which it reads.
func (o *Options) setupNode(ctx context.Context, name string) (Client, Keys, *corev1.Node, error) {
	client, k, err := o.setup(ctx)
	if err != nil {
		return nil, Keys{}, nil, err
	}
	node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, Keys{}, nil, fmt.Errorf("get node %s: %w", name, err)
	}
	return client, k, node, nil
}

func (o *Options) warn(msg string) { fmt.Fprintln(o.streams.ErrOut, "Warning: "+msg) }

// logf tells on stderr what -v asks for from level up.
func (o *Options) logf(level int, format string, args ...any) {
	if o.verbosity >= level {
		fmt.Fprintf(o.streams.ErrOut, format+"\n", args...)
	}
}
