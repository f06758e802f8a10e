package failure

import (
	"regexp"

	"github.com/nodeready/nodeready/internal/wellknown"
)

// rfc1123z matches the times in `kubectl describe node`'s Conditions table.
const rfc1123z = `\w{3}, \d{2} \w{3} \d{4} \d{2}:\d{2}:\d{2} [+-]\d{4}`

// describedCondition returns the status, reason and message of the agent's condition in the
// Conditions table of `kubectl describe node`, or nil when the table has no such row.
func describedCondition(out string) []string {
	re := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(string(wellknown.ConditionType)) +
		`\s+(True|False|Unknown)\s+` + rfc1123z + `\s+` + rfc1123z + `\s+(\S+)\s+(.*?)\s*$`)
	m := re.FindStringSubmatch(out)
	if m == nil {
		return nil
	}
	return m[1:]
}

// describedEvents returns the messages of the Events of type and reason that `kubectl
// describe node` lists as sent by the agent.
func describedEvents(out, typ, reason string) []string {
	re := regexp.MustCompile(`(?m)^\s*` + typ + `\s+` + regexp.QuoteMeta(reason) + `\s+.*\snodeready\.io/agent\s+(.*?)\s*$`)
	var msgs []string
	for _, m := range re.FindAllStringSubmatch(out, -1) {
		msgs = append(msgs, m[1])
	}
	return msgs
}
