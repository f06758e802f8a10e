package agent

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nodeready/nodeready/checks"
	"github.com/nodeready/nodeready/internal/config"
	"github.com/nodeready/nodeready/internal/kube"
)

// DryRun runs every check that can run from here once, prints a table to
// out, and returns the exit code: 0 when every check that ran passed, 1
// otherwise: a check failed here, or the cluster or the configuration stands
// in its way (misconfigured). It never writes to a cluster: it has no patcher at all. client
// may be nil, and then the API checks are shown as skipped.
func DryRun(ctx context.Context, cfg config.Config, client kube.Interface, out io.Writer) int {
	return printDryRun(out, checks.RunAll(ctx, buildChecks(cfg, client, checks.APIServerEndpoint{}), cfg.CheckTimeout))
}

// printDryRun writes the table and returns the exit code.
func printDryRun(out io.Writer, results []checks.Result) int {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tTARGET\tRESULT\tDURATION\tDETAIL")
	counts := map[string]int{}
	for _, r := range results {
		counts[r.Status()]++
		detail := ""
		if r.Err != nil {
			detail = strings.ReplaceAll(r.Err.Error(), "\n", " ")
		} else if !r.Report.Empty() {
			// What was reached, with the sizes and directions proven, and what was not.
			var said reports
			said.add(r)
			detail = strings.TrimPrefix(said.message(), "; ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Name, r.Target, r.Status(), r.Duration.Round(time.Millisecond/10), detail)
	}
	_ = tw.Flush()
	fmt.Fprintf(out, "%d passed, %d failed, %d misconfigured, %d skipped\n", counts["pass"], counts["fail"], counts["misconfigured"], counts["skip"])
	if counts["fail"]+counts["misconfigured"] > 0 {
		return 1
	}
	return 0
}
