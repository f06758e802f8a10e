package checks_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodeready/nodeready/checks"
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
			got, err := checks.ParseConditionWant(tt.in)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
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
			want, err := checks.ParseConditionWant(tt.want)
			require.NoError(t, err)
			client := fake.NewClientset(tt.node)
			c := checks.NewNodeCondition(client, "node-a", want)
			require.Equal(t, "conditions", c.Name())
			require.Equal(t, tt.want, c.Target())

			res := checks.Execute(t.Context(), c, 5*time.Second)

			if tt.wantErr == "" {
				assert.NoError(t, res.Err)
			} else {
				require.Error(t, res.Err)
				assert.Equal(t, tt.wantErr, res.Err.Error())
			}
			require.Len(t, client.Actions(), 1)
			assert.Equal(t, "get", client.Actions()[0].GetVerb())
		})
	}
}

func TestNodeConditionWaitThenPass(t *testing.T) {
	node := nodeWithConditions(corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse})
	client := fake.NewClientset(node)
	c := checks.NewNodeCondition(client, "node-a", checks.ConditionWant{Type: corev1.NodeReady, Status: corev1.ConditionTrue})

	res := checks.Execute(t.Context(), c, 5*time.Second)
	require.Error(t, res.Err)
	assert.Equal(t, "node node-a: condition Ready is False, want True", res.Err.Error())

	node.Status.Conditions[0].Status = corev1.ConditionTrue
	_, err := client.CoreV1().Nodes().UpdateStatus(t.Context(), node, metav1.UpdateOptions{})
	require.NoError(t, err)

	res = checks.Execute(t.Context(), c, 5*time.Second)
	assert.NoError(t, res.Err)
}
