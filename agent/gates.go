package agent

import (
	"k8s.io/client-go/kubernetes"

	"github.com/nodeready/nodeready/checks"
	"github.com/nodeready/nodeready/config"
)

// The gates are the checks of the node's own readiness beyond the network:
// daemonsets, conditions, resources, csi, dra and command. MIN_HOLD_TIME is part
// of the agent's loop, not a gate: waiting never counts as failing.

// gateChecks builds the checks of the gate name, one per target where the
// targets are known from the configuration.
func gateChecks(name checks.Name, c config.Config, client kubernetes.Interface) []checks.Check {
	// apiSkip is the reason an API gate cannot run here, or "".
	apiSkip := func() string {
		switch {
		case client == nil:
			return "no kubeconfig: set KUBECONFIG or create ~/.kube/config"
		case c.NodeName == "":
			return "NODE_NAME is not set"
		}
		return ""
	}
	var list []checks.Check
	switch name {
	case checks.NameDaemonSets:
		ds := checks.NewDaemonSets(client, c.NodeName, checks.DaemonSetsOptions{
			Names:              c.DaemonSets,
			Selector:           c.DaemonSetsSelector,
			Exclude:            c.DaemonSetsExclude,
			VerifiedLabel:      c.VerifiedLabel,
			VerifiedLabelValue: c.VerifiedLabelValue,
		})
		if why := apiSkip(); why != "" {
			return []checks.Check{skip(name, ds.Target(), why)}
		}
		list = append(list, ds)
	case checks.NameConditions:
		for _, want := range c.NodeConditions {
			if why := apiSkip(); why != "" {
				list = append(list, skip(name, want.String(), why))
				continue
			}
			list = append(list, checks.NewNodeCondition(client, c.NodeName, want))
		}
	case checks.NameResources:
		for _, min := range c.RequiredResources {
			if why := apiSkip(); why != "" {
				list = append(list, skip(name, min.String(), why))
				continue
			}
			list = append(list, checks.NewResource(client, c.NodeName, min))
		}
	case checks.NameCSI:
		for _, d := range c.CSIDrivers {
			if why := apiSkip(); why != "" {
				list = append(list, skip(name, d, why))
				continue
			}
			list = append(list, checks.NewCSIDriver(client, c.NodeName, d, c.CSIRequireAllocatable))
		}
	case checks.NameDRA:
		api := checks.NewDRAAPI(client) // one discovery of the served version for every driver
		for _, min := range c.DRADevices {
			if why := apiSkip(); why != "" {
				list = append(list, skip(name, min.String(), why))
				continue
			}
			list = append(list, checks.NewDRADevices(client, api, c.NodeName, min))
		}
	case checks.NameCommand:
		list = append(list, checks.NewCommand(c.CommandPath, c.CommandArgs))
	}
	return list
}
