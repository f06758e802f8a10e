package agent

import (
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// NewClients builds the agent's clients from cfg: main builds them so for every agent, and
// the scale benchmark for each of its in-process agents. They speak JSON, client-go's
// default: protobuf for the typed client changed neither the binary's size, the agent's peak
// RSS nor the API server's CPU per node beyond the run-to-run noise of make bench.
func NewClients(cfg *rest.Config) (Clients, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return Clients{}, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return Clients{}, err
	}
	return Clients{Kube: kube, Dynamic: dyn}, nil
}
