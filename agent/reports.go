package agent

import (
	"fmt"
	"strings"

	"github.com/nodeready/nodeready/checks"
	"github.com/nodeready/nodeready/internal/wellknown"
)

// reports is what the passing checks of a round said beyond "passed" (checks.Report),
// as the condition and the Events tell it.
type reports struct {
	reached, notProven, unreachable []string
}

func (r *reports) add(res checks.Result) {
	if rep := res.Report; len(rep.Reached) > 0 {
		r.reached = append(r.reached, fmt.Sprintf("%s reached %s", res.Name, strings.Join(rep.Reached, "; ")))
	}
	if rep := res.Report; len(rep.NotProven) > 0 {
		r.notProven = append(r.notProven, fmt.Sprintf("%s did not prove %s", res.Name, strings.Join(rep.NotProven, "; ")))
	}
	if rep := res.Report; len(rep.Unreachable) > 0 {
		r.unreachable = append(r.unreachable, fmt.Sprintf("%s could not reach %s", res.Name, strings.Join(rep.Unreachable, "; ")))
	}
}

// message is what the condition adds to "All N checks passed": what was reached and
// proven, what was not proven, and the peers at fault.
func (r reports) message() string {
	var b strings.Builder
	for _, part := range [][]string{r.reached, r.notProven, r.unreachable} {
		for _, s := range part {
			b.WriteString("; ")
			b.WriteString(s)
		}
	}
	return b.String()
}

// tell emits, after a release, a Warning Event for what was not proven and one for the
// peers that did not answer: those are another node's fault, named on this node so that
// they can be found (kubectl get events --field-selector reason=PeerUnreachable).
func (r reports) tell(events eventer) {
	if len(r.notProven) > 0 {
		events.Eventf(wellknown.NotProven, "Released without proving everything: %s", strings.Join(r.notProven, "; "))
	}
	if len(r.unreachable) > 0 {
		events.Eventf(wellknown.PeerUnreachable, "Released; another node's fault, not this one's: %s", strings.Join(r.unreachable, "; "))
	}
}
