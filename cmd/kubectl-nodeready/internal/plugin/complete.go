package plugin

import (
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// completeNodes completes a command's NODE with the names of the nodes want takes (those a
// release or re-verification is for), read with one LIST as the command would judge them.
// kubectl runs it through `kubectl-nodeready __complete` (a kubectl_complete-nodeready on
// the PATH); a node is never completed where --selector or --all chooses the nodes.
func (o *Options) completeNodes(want func(Keys, *corev1.Node) bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 || cmd.Flags().Changed("selector") || cmd.Flags().Changed("all") {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		// Warnings would land amid the shell's prompt: completion stays quiet.
		quiet := *o
		quiet.streams = genericiooptions.IOStreams{In: o.streams.In, Out: io.Discard, ErrOut: io.Discard}
		client, k, err := quiet.setup(cmd.Context())
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		list, err := client.CoreV1().Nodes().List(cmd.Context(), metav1.ListOptions{})
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var names []cobra.Completion
		for i := range list.Items {
			n := &list.Items[i]
			if strings.HasPrefix(n.Name, toComplete) && want(k, n) {
				names = append(names, n.Name)
			}
		}
		slices.Sort(names)
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}
