package agent

import (
	"context"
	"fmt"

	"k8s.io/client-go/kubernetes"

	"github.com/nodeready/nodeready/checks"
	"github.com/nodeready/nodeready/internal/config"
)

// buildChecks turns the configuration into the list of checks, one per
// target, in the order of CHECKS. A check that cannot run where the agent is
// (no kubeconfig in --dry-run, no target known) becomes a skipped check that
// says why, so the dry-run table shows it instead of hiding it.
func buildChecks(c config.Config, client kubernetes.Interface) []checks.Check {
	var list []checks.Check
	for _, name := range c.Checks {
		switch name {
		case checks.NameDNS:
			resolver := checks.NewResolver(c.DNSNameserver)
			for _, d := range c.DNSTestDomains {
				var dns checks.Check = checks.NewDNS(d, resolver)
				if svc := c.ClusterDNSService; svc.Name != "" && client != nil {
					dns = checks.NewUnlessNoClusterDNS(dns, client, svc.Namespace, svc.Name)
				}
				list = append(list, dns)
			}
		case checks.NameTCP:
			if len(c.TCPTargets) == 0 {
				list = append(list, skip(name, "-", "no target: TCP_TARGETS is empty and KUBERNETES_SERVICE_HOST is not set"))
			}
			for _, a := range c.TCPTargets {
				list = append(list, checks.NewTCP(a, nil))
			}
		case checks.NameHTTP:
			for _, u := range c.HTTPURLs {
				list = append(list, checks.NewHTTP(u, c.HTTPExpectedStatus, c.HTTPClient))
			}
		case checks.NameAPIServer:
			switch {
			case client == nil:
				list = append(list, skip(name, "-", "no kubeconfig: set KUBECONFIG or create ~/.kube/config"))
			case c.APIServerProbe == checks.APIServerNode && c.NodeName == "":
				list = append(list, skip(name, "node/-", "NODE_NAME is not set"))
			default:
				list = append(list, checks.NewAPIServer(client, c.APIServerProbe, c.NodeName))
			}
		case checks.NameEndpoints:
			svc := c.EndpointsService
			if client == nil {
				list = append(list, skip(name, svc.String(), "no kubeconfig: set KUBECONFIG or create ~/.kube/config"))
				continue
			}
			list = append(list, checks.NewEndpoints(client, svc.Namespace, svc.Name, c.EndpointsConnect, nil))
		case checks.NamePodNetwork:
			svc := c.PodNetworkService
			if client == nil {
				list = append(list, skip(name, svc.String(), "no kubeconfig: set KUBECONFIG or create ~/.kube/config"))
				continue
			}
			list = append(list, checks.NewPodNetwork(client, c.NodeName, svc.Namespace, svc.Name, c.PodNetworkNodes, c.PodNetworkProbe))
		case checks.NameDaemonSets, checks.NameConditions, checks.NameResources, checks.NameCSI, checks.NameDRA, checks.NameCommand:
			list = append(list, gateChecks(name, c, client)...)
		}
	}
	return list
}

// skipped is a check that cannot run here; it reports the reason as a skip.
type skipped struct {
	name           checks.Name
	target, reason string
}

func skip(name checks.Name, target, reason string) checks.Check { return skipped{name, target, reason} }

func (s skipped) Name() string   { return string(s.name) }
func (s skipped) Target() string { return s.target }
func (s skipped) Run(context.Context) error {
	return fmt.Errorf("%w: %s", checks.ErrSkipped, s.reason)
}
