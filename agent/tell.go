package agent

import (
	"context"
	"strings"

	"github.com/rs/zerolog"

	"github.com/nodeready/nodeready/internal/wellknown"
)

// told is a transition as people see it: a log line, an Event about the node and
// the node's condition, each where it applies, told together by tell.
type told struct {
	level  zerolog.Level
	msg    string         // the log line; none when empty
	fields map[string]any // the log line's fields
	// reason and note are the Event; none when reason is empty.
	reason wellknown.Reason
	note   string
	// condition is the node's condition from now on, when set.
	condition *wellknown.Condition
}

// tell tells t: the log line, the Event and the condition.
func (a *Agent) tell(ctx context.Context, log zerolog.Logger, t told) {
	if t.msg != "" {
		log.WithLevel(t.level).Fields(t.fields).Msg(t.msg)
	}
	if t.reason != "" {
		a.events.Eventf(t.reason, "%s", t.note)
	}
	if t.condition != nil {
		a.condition.Set(ctx, log, *t.condition)
	}
}

// summary joins the problems for a condition or Event message. The recorder and
// nodepatch.SetCondition bound the length, whatever is added to it.
func summary(problems []string) string { return strings.Join(problems, "; ") }
