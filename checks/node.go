package checks

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nodeready/nodeready/internal/envvar"
	"github.com/nodeready/nodeready/internal/kube"
)

// getNode reads the node the gates judge, with an error that names it.
func getNode(ctx context.Context, client kube.Interface, name string) (*corev1.Node, error) {
	if name == "" {
		return nil, errors.New("get node: no node name (NODE_NAME)")
	}
	node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get node %q: %w", name, apiError(err))
	}
	return node, nil
}

// cutQualified splits s, one entry of a node gate's setting, at sep into a qualified name
// (what the name is, for the error) and a value, both trimmed. form is how an entry is
// written, for the error when s lacks sep.
func cutQualified(s, sep, form, what string) (name, value string, err error) {
	name, value, ok := strings.Cut(s, sep)
	name, value = strings.TrimSpace(name), strings.TrimSpace(value)
	if !ok {
		return "", "", fmt.Errorf("%q: want %s", s, form)
	}
	if errs := validation.IsQualifiedName(name); len(errs) > 0 {
		return "", "", fmt.Errorf("%s %q: %s", what, name, strings.Join(errs, "; "))
	}
	return name, value, nil
}

// nodeWant is what a gate wants of the node's own object: written as the
// check's target, and judged against the node as read.
type nodeWant interface {
	String() string
	judge(node *corev1.Node) error
}

// nodeGate is a gate that reads the node once per round and lets its want
// judge it. The gates of one node object (conditions, resources) embed it, so
// reading and naming the node are written once.
type nodeGate[W nodeWant] struct {
	name     Name
	client   kube.Interface
	nodeName string
	want     W
}

// Name implements Check.
func (g *nodeGate[W]) Name() string { return string(g.name) }

// Target implements Check.
func (g *nodeGate[W]) Target() string { return g.want.String() }

// Run implements Check.
func (g *nodeGate[W]) Run(ctx context.Context) error {
	node, err := getNode(ctx, g.client, g.nodeName)
	if err != nil {
		return err
	}
	return g.want.judge(node)
}

// parseTargets parses the targets a gate's variable lists, each with parse.
// The list is required (required says when) when the gate is selected, and no
// two targets may share a key; named names the one named twice in the message.
func parseTargets[T any](variable string, values envvar.List, selected bool, required string,
	parse func(string) (T, error), key, named func(T) string,
) ([]T, error) {
	if selected && len(values) == 0 {
		return nil, envvar.Required(variable, required)
	}
	var list []T
	seen := map[string]bool{}
	for _, s := range values {
		t, err := parse(s)
		if err != nil {
			return nil, &envvar.Error{Var: variable, Value: values.String(), Accepted: err.Error()}
		}
		if seen[key(t)] {
			return nil, &envvar.Error{Var: variable, Value: values.String(), Accepted: named(t) + " is named twice"}
		}
		seen[key(t)] = true
		list = append(list, t)
	}
	return list, nil
}
