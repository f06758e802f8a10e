package checks_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodeready/nodeready/checks"
	"github.com/nodeready/nodeready/internal/kube/adapt"
)

func TestParseConditionWant(t *testing.T) {
	tests := []struct {
		in      string
		want    checks.ConditionWant
		wantErr string
	}{
		{in: "Ready=True", want: checks.ConditionWant{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		{in: " NetworkUnavailable = False ", want: checks.ConditionWant{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse}},
		{in: "example.com/GPUHealthy=Unknown", want: checks.ConditionWant{Type: "example.com/GPUHealthy", Status: corev1.ConditionUnknown}},
		{in: "Ready", wantErr: `"Ready": want Type=Status, such as Ready=True`},
		{in: "Ready=true", wantErr: `status "true" of Ready: want one of True, False, Unknown`},
		{in: "=True", wantErr: `condition type ""`},
		{in: "Not Ready=True", wantErr: `condition type "Not Ready"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got, ok := parsed(t, checks.ParseConditionWant, tt.in, tt.wantErr); ok {
				assert.Equal(t, tt.want, got)
			}
		})
	}
}

func nodeWithConditions(conds ...corev1.NodeCondition) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}
	n.Status.Conditions = conds
	return n
}

func TestNodeCondition(t *testing.T) {
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue}
	notReady := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady", Message: "container runtime network not ready"}
	network := corev1.NodeCondition{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse}
	tests := []struct {
		name    string
		node    *corev1.Node
		want    string
		wantErr string
	}{
		{name: "Ready", node: nodeWithConditions(network, ready), want: "Ready=True"},
		{name: "network available", node: nodeWithConditions(ready, network), want: "NetworkUnavailable=False"},
		{name: "not Ready, with reason and message", node: nodeWithConditions(notReady), want: "Ready=True",
			wantErr: "node node-a: condition Ready is False, want True (KubeletNotReady: container runtime network not ready)"},
		{name: "reason only", node: nodeWithConditions(corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown"}), want: "Ready=True",
			wantErr: "node node-a: condition Ready is Unknown, want True (NodeStatusUnknown)"},
		{name: "missing condition", node: nodeWithConditions(ready), want: "NetworkUnavailable=False",
			wantErr: "node node-a: no condition NetworkUnavailable, want False"},
		{name: "missing node", node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}}, want: "Ready=True",
			wantErr: `get node "node-a": nodes "node-a" not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(tt.node)
			c := checks.NewNodeCondition(adapt.Clientset(client), "node-a", mustParse(t, checks.ParseConditionWant, tt.want))
			requireIdentity(t, c, "conditions", tt.want)

			assertErr(t, checks.Execute(t.Context(), c, runTimeout).Err, tt.wantErr)
			assert.Equal(t, "get", onlyAction(t, client).GetVerb())
		})
	}
}

func TestNodeConditionWaitThenPass(t *testing.T) {
	node := nodeWithConditions(corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse})
	client := fake.NewClientset(node)
	c := checks.NewNodeCondition(adapt.Clientset(client), "node-a", checks.ConditionWant{Type: corev1.NodeReady, Status: corev1.ConditionTrue})

	failThenPass(t, c, "node node-a: condition Ready is False, want True", func() {
		node.Status.Conditions[0].Status = corev1.ConditionTrue
		updateNodeStatus(t, client, node)
	})
}

// updateNodeStatus writes node's status as the kubelet would.
func updateNodeStatus(t *testing.T, client *fake.Clientset, node *corev1.Node) {
	t.Helper()
	_, err := client.CoreV1().Nodes().UpdateStatus(t.Context(), node, metav1.UpdateOptions{})
	require.NoError(t, err)
}
