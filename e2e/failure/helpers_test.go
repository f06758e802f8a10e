package failure

import (
	"context"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeready/nodeready/e2e/harness"
	"github.com/nodeready/nodeready/nodepatch"
)

// poll calls cond until it is done, bounded by harness.WaitTimeout.
func poll(t *testing.T, cond wait.ConditionWithContextFunc) error {
	t.Helper()
	return wait.PollUntilContextTimeout(t.Context(), harness.PollInterval, harness.WaitTimeout, true, cond)
}

func getNode(t *testing.T, c *harness.Cluster, name string) *corev1.Node {
	t.Helper()
	n, err := c.Client().CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return n
}

// waitAgentCondition waits until the node reports the agent's condition with reason.
func waitAgentCondition(t *testing.T, c *harness.Cluster, node, reason string) corev1.NodeCondition {
	t.Helper()
	cond, err := c.WaitAgentCondition(t.Context(), node, reason)
	require.NoError(t, err)
	return cond
}

// nodeEvents returns the events.k8s.io Events about the node with the given reason. Events
// about a Node live in the default namespace.
func nodeEvents(ctx context.Context, c *harness.Cluster, node, reason string) ([]eventsv1.Event, error) {
	list, err := c.Client().EventsV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind == "Node" && e.Regarding.Name == node && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out, nil
}

// waitEvent waits for an Event about the node with the reason (the agent sends Events
// asynchronously) and returns the first.
func waitEvent(t *testing.T, c *harness.Cluster, node, reason string) eventsv1.Event {
	t.Helper()
	var found []eventsv1.Event
	err := poll(t, func(ctx context.Context) (bool, error) {
		var err error
		found, err = nodeEvents(ctx, c, node, reason)
		return err == nil && len(found) > 0, nil
	})
	require.NoError(t, err, "no %s Event about node %s", reason, node)
	return found[0]
}

// requireNoEvent asserts that no Event about the node has the reason.
func requireNoEvent(t *testing.T, c *harness.Cluster, node, reason string) {
	t.Helper()
	found, err := nodeEvents(t.Context(), c, node, reason)
	require.NoError(t, err)
	require.Empty(t, found, "%s Event about node %s", reason, node)
}

// rfc1123z matches the times in `kubectl describe node`'s Conditions table.
const rfc1123z = `\w{3}, \d{2} \w{3} \d{4} \d{2}:\d{2}:\d{2} [+-]\d{4}`

// describedCondition returns the status, reason and message of the agent's condition in the
// Conditions table of `kubectl describe node`, or nil when the table has no such row.
func describedCondition(out string) []string {
	re := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(string(nodepatch.ConditionType)) +
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
