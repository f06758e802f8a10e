package plugin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// selection is what release and reverify act on: one node by its name, or the nodes of a
// label selector (--selector), or every node (--all).
type selection struct {
	name     string
	selector string
	all      bool
}

// addSelectionFlags adds --selector, --all and --dry-run to a command that writes nodes.
func addSelectionFlags(cmd *cobra.Command, verb string) {
	cmd.Flags().StringP("selector", "l", "", "the nodes to "+verb+": those that match this label selector, such as karpenter.sh/nodepool=default")
	cmd.Flags().Bool("all", false, "the nodes to "+verb+": every node")
	cmd.Flags().Bool("dry-run", false, "print what would change, and write nothing")
}

// selectionOf reads the node's name or the selection flags: exactly one of them, and
// --force only with a name, so a fleet-wide write never takes a refusal's way around.
func selectionOf(cmd *cobra.Command, args []string) (selection, error) {
	var s selection
	if len(args) == 1 {
		s.name = args[0]
	}
	s.selector, _ = cmd.Flags().GetString("selector")
	s.all, _ = cmd.Flags().GetBool("all")
	bySelector := cmd.Flags().Changed("selector")
	force, _ := cmd.Flags().GetBool("force")
	switch {
	case s.name != "" && (bySelector || s.all):
		return s, fmt.Errorf("name a node or choose nodes with --selector or --all, not both")
	case bySelector && s.all:
		return s, fmt.Errorf("--selector or --all, not both")
	case s.name == "" && !bySelector && !s.all:
		return s, fmt.Errorf("name a node, or choose nodes with --selector or --all")
	case bySelector && strings.TrimSpace(s.selector) == "":
		return s, fmt.Errorf("--selector is empty: give a label selector, or --all for every node")
	case force && s.name == "":
		return s, fmt.Errorf("--force works on one node by its name only, not with --selector or --all")
	}
	if bySelector {
		if _, err := labels.Parse(s.selector); err != nil {
			return s, fmt.Errorf("--selector %q: %w", s.selector, err)
		}
	}
	return s, nil
}

// eachNode lists the selected nodes (one LIST) and calls write for each that leave does
// not leave as it is (it says why); verb and did name the write for the summary. A node the write refuses is left too; any
// other error is told and the others still done. It ends with a summary line, and an
// error when a write failed.
func (o *Options) eachNode(ctx context.Context, client Client, sel selection, verb, did string, dryRun bool,
	leave func(*corev1.Node) string, write func(*corev1.Node) error) error {
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: sel.selector})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	chosen := "every node"
	if !sel.all {
		chosen = "the nodes of " + sel.selector
	}
	if len(list.Items) == 0 {
		_, err := fmt.Fprintf(o.streams.Out, "No nodes found (%s).\n", chosen)
		return err
	}
	nodes := list.Items
	slices.SortFunc(nodes, func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	var done, left int
	var failed []string
	for i := range nodes {
		n := &nodes[i]
		if why := leave(n); why != "" {
			left++
			o.logf(1, "node/%s left as it is: %s", n.Name, why)
			continue
		}
		err := write(n)
		switch {
		case errors.Is(err, ErrRefused):
			// The node changed since the LIST: the write's own refusal.
			left++
			o.logf(1, "node/%s left as it is: %s", n.Name, strings.TrimPrefix(err.Error(), ErrRefused.Error()+": "))
		case err != nil:
			failed = append(failed, n.Name)
			fmt.Fprintln(o.streams.ErrOut, "error:", err)
		default:
			done++
		}
	}
	if dryRun {
		did = "would be " + did
	}
	fmt.Fprintf(o.streams.Out, "%d nodes (%s): %d %s, %d left as they are", len(nodes), chosen, done, did, left)
	if len(failed) > 0 {
		fmt.Fprintf(o.streams.Out, ", %d failed", len(failed))
	}
	if left > 0 && o.verbosity < 1 {
		fmt.Fprint(o.streams.Out, " (-v=1 says why)")
	}
	fmt.Fprintln(o.streams.Out)
	if len(failed) > 0 {
		return fmt.Errorf("could not %s %d of the nodes: %s", verb, len(failed), strings.Join(failed, ", "))
	}
	return nil
}
