package agent

import (
	"k8s.io/client-go/kubernetes"

	"github.com/nodeready/nodeready/checks"
	"github.com/nodeready/nodeready/internal/config"
)

// The gates are the checks of the node's own readiness beyond the network:
// daemonsets, conditions, resources, csi, dra and command. MIN_HOLD_TIME is part
// of the agent's loop, not a gate: waiting never counts as failing.

// gateChecks builds the checks of the gate name, one per target where the
// targets are known from the configuration.
func gateChecks(name checks.Name, c config.Config, client kubernetes.Interface) []checks.Check {
	// why is the reason the API gates cannot run here, or "".
	var why string
	switch {
	case client == nil:
		why = "no kubeconfig: set KUBECONFIG or create ~/.kube/config"
	case c.NodeName == "":
		why = "NODE_NAME is not set"
	}
	switch name {
	case checks.NameDaemonSets:
		ds := checks.NewDaemonSets(client, c.NodeName, checks.DaemonSetsOptions{
			Names:              c.DaemonSets,
			Selector:           c.DaemonSetsSelector,
			Exclude:            c.DaemonSetsExclude,
			VerifiedLabel:      c.VerifiedLabel,
			VerifiedLabelValue: c.VerifiedLabelValue,
		})
		if why != "" {
			return []checks.Check{skip(name, ds.Target(), why)}
		}
		return []checks.Check{ds}
	case checks.NameConditions:
		return perTarget(name, c.NodeConditions, why, checks.ConditionWant.String, func(want checks.ConditionWant) checks.Check {
			return checks.NewNodeCondition(client, c.NodeName, want)
		})
	case checks.NameResources:
		return perTarget(name, c.RequiredResources, why, checks.ResourceMinimum.String, func(min checks.ResourceMinimum) checks.Check {
			return checks.NewResource(client, c.NodeName, min)
		})
	case checks.NameCSI:
		return perTarget(name, c.CSIDrivers, why, func(d string) string { return d }, func(d string) checks.Check {
			return checks.NewCSIDriver(client, c.NodeName, d, c.CSIRequireAllocatable)
		})
	case checks.NameDRA:
		api := checks.NewDRAAPI(client) // one discovery of the served version for every driver
		return perTarget(name, c.DRADevices, why, checks.DeviceMinimum.String, func(min checks.DeviceMinimum) checks.Check {
			return checks.NewDRADevices(client, api, c.NodeName, min)
		})
	case checks.NameCommand:
		return []checks.Check{checks.NewCommand(c.CommandPath, c.CommandArgs)}
	}
	return nil
}

// perTarget builds one check per target with build, or, when why is set, one
// skipped check per target named by target.
func perTarget[T any](name checks.Name, targets []T, why string, target func(T) string, build func(T) checks.Check) []checks.Check {
	var list []checks.Check
	for _, t := range targets {
		if why != "" {
			list = append(list, skip(name, target(t), why))
			continue
		}
		list = append(list, build(t))
	}
	return list
}
