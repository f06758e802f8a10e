package agent

import (
	"context"
	"fmt"

	"k8s.io/client-go/kubernetes"

	"github.com/nodeready/nodeready/checks"
)

// buildChecks turns the configuration into the list of checks, one per
// target, in the order of CHECKS. A check that cannot run where the agent is
// (no kubeconfig in --dry-run, no target known) becomes a skipped check that
// says why, so the dry-run table shows it instead of hiding it.
func buildChecks(c Config, client kubernetes.Interface) ([]checks.Check, error) {
	var list []checks.Check
	for _, name := range c.Checks {
		switch name {
		case CheckDNS:
			resolver := checks.NewResolver(c.DNSNameserver)
			for _, d := range c.DNSTestDomains {
				var dns checks.Check = checks.NewDNS(d, resolver)
				if c.ClusterDNS != "" && client != nil {
					ns, svc := c.ClusterDNSRef()
					dns = checks.NewUnlessNoClusterDNS(dns, client, ns, svc)
				}
				list = append(list, dns)
			}
		case CheckTCP:
			addrs := c.TCPAddresses()
			if len(addrs) == 0 {
				list = append(list, skip(name, "-", "no target: TCP_TARGETS is empty and KUBERNETES_SERVICE_HOST is not set"))
			}
			for _, a := range addrs {
				list = append(list, checks.NewTCP(a, nil))
			}
		case CheckHTTP:
			httpClient, err := checks.NewHTTPClient(c.HTTPCAFile)
			if err != nil {
				return nil, fmt.Errorf("HTTP_CA_FILE: %w", err)
			}
			expect, err := checks.ParseStatusMatcher(c.HTTPExpectedStatus)
			if err != nil {
				return nil, fmt.Errorf("HTTP_EXPECTED_STATUS: %w", err)
			}
			for _, u := range c.HTTPURLs {
				list = append(list, checks.NewHTTP(u, expect, httpClient))
			}
		case CheckAPIServer:
			switch {
			case client == nil:
				list = append(list, skip(name, "-", "no kubeconfig: set KUBECONFIG or create ~/.kube/config"))
			case c.APIServerProbe == checks.APIServerNode && c.NodeName == "":
				list = append(list, skip(name, "node/-", "NODE_NAME is not set"))
			default:
				list = append(list, checks.NewAPIServer(client, c.APIServerProbe, c.NodeName))
			}
		case CheckEndpoints:
			ns, svc := c.EndpointsRef()
			if client == nil {
				list = append(list, skip(name, ns+"/"+svc, "no kubeconfig: set KUBECONFIG or create ~/.kube/config"))
				continue
			}
			list = append(list, checks.NewEndpoints(client, ns, svc, c.EndpointsConnect, nil))
		case CheckDaemonSets, CheckConditions, CheckResources, CheckCSI, CheckDRA, CheckCommand:
			gates, err := gateChecks(name, c, client)
			if err != nil {
				return nil, err
			}
			list = append(list, gates...)
		}
	}
	return list, nil
}

// skipped is a check that cannot run here; it reports the reason as a skip.
type skipped struct{ name, target, reason string }

func skip(name, target, reason string) checks.Check { return skipped{name, target, reason} }

func (s skipped) Name() string   { return s.name }
func (s skipped) Target() string { return s.target }
func (s skipped) Run(context.Context) error {
	return fmt.Errorf("%w: %s", checks.ErrSkipped, s.reason)
}
