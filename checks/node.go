package checks

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// getNode reads the node the gates judge, with an error that names it.
func getNode(ctx context.Context, client kubernetes.Interface, name string) (*corev1.Node, error) {
	if name == "" {
		return nil, errors.New("get node: no node name (NODE_NAME)")
	}
	node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get node %q: %w", name, explainForbidden(err))
	}
	return node, nil
}
