package agent

import (
	"fmt"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeready/nodeready/checks"
)

// The gates are the checks of the node's own readiness beyond the network:
// daemonsets, conditions, resources, csi, dra and command. MIN_HOLD_TIME is part
// of the agent's loop, not a gate: waiting never counts as failing.

// gateChecks builds the checks of the gate name, one per target where the
// targets are known from the configuration.
func gateChecks(name string, c Config, client kubernetes.Interface) ([]checks.Check, error) {
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
	case CheckDaemonSets:
		sel, err := labels.Parse(c.DaemonSetsSelector)
		if err != nil {
			return nil, fmt.Errorf("DAEMONSETS_SELECTOR: %w", err)
		}
		ds := checks.NewDaemonSets(client, c.NodeName, checks.DaemonSetsOptions{
			Names:              c.DaemonSets,
			Selector:           sel,
			Exclude:            c.DaemonSetsExclude,
			VerifiedLabel:      c.VerifiedLabel,
			VerifiedLabelValue: c.VerifiedLabelValue,
		})
		if why := apiSkip(); why != "" {
			return []checks.Check{skip(name, ds.Target(), why)}, nil
		}
		list = append(list, ds)
	case CheckConditions:
		for _, s := range c.NodeConditions {
			want, err := checks.ParseConditionWant(s)
			if err != nil {
				return nil, fmt.Errorf("NODE_CONDITIONS: %w", err)
			}
			if why := apiSkip(); why != "" {
				list = append(list, skip(name, want.String(), why))
				continue
			}
			list = append(list, checks.NewNodeCondition(client, c.NodeName, want))
		}
	case CheckResources:
		for _, s := range c.RequiredResources {
			min, err := checks.ParseResourceMinimum(s)
			if err != nil {
				return nil, fmt.Errorf("REQUIRED_RESOURCES: %w", err)
			}
			if why := apiSkip(); why != "" {
				list = append(list, skip(name, min.String(), why))
				continue
			}
			list = append(list, checks.NewResource(client, c.NodeName, min))
		}
	case CheckCSI:
		for _, d := range c.CSIDrivers {
			if why := apiSkip(); why != "" {
				list = append(list, skip(name, d, why))
				continue
			}
			list = append(list, checks.NewCSIDriver(client, c.NodeName, d, c.CSIRequireAllocatable))
		}
	case CheckDRA:
		api := checks.NewDRAAPI(client) // one discovery of the served version for every driver
		for _, s := range c.DRADevices {
			min, err := checks.ParseDeviceMinimum(s)
			if err != nil {
				return nil, fmt.Errorf("DRA_DEVICES: %w", err)
			}
			if why := apiSkip(); why != "" {
				list = append(list, skip(name, min.String(), why))
				continue
			}
			list = append(list, checks.NewDRADevices(client, api, c.NodeName, min))
		}
	case CheckCommand:
		list = append(list, checks.NewCommand(c.CommandPath, c.CommandArgs))
	}
	return list, nil
}

// validateGates checks the settings of the gates, whether or not CHECKS
// names them, so a mistake shows before the gate is turned on.
func (c *Config) validateGates() error {
	for _, v := range []func() error{
		func() error {
			for _, key := range c.DaemonSets {
				if err := namespacedName("DAEMONSETS", key); err != nil {
					return err
				}
			}
			return nil
		},
		func() error {
			if _, err := labels.Parse(c.DaemonSetsSelector); err != nil {
				return &ConfigError{"DAEMONSETS_SELECTOR", c.DaemonSetsSelector, "not a label selector: use a form such as tier=node, app in (cni,csi) or !example.com/optional"}
			}
			if c.DaemonSetsSelector != "" && len(c.DaemonSets) > 0 {
				return &ConfigError{"DAEMONSETS_SELECTOR", c.DaemonSetsSelector, "limits discovery only: leave it empty when DAEMONSETS lists the DaemonSets"}
			}
			return nil
		},
		func() error {
			for _, key := range c.DaemonSetsExclude {
				if err := namespacedName("DAEMONSETS_EXCLUDE", key); err != nil {
					return err
				}
			}
			if len(c.DaemonSetsExclude) > 0 && len(c.DaemonSets) > 0 {
				return &ConfigError{"DAEMONSETS_EXCLUDE", c.DaemonSetsExclude.String(), "limits discovery only: leave it empty when DAEMONSETS lists the DaemonSets"}
			}
			return nil
		},
		func() error {
			if c.Selected(CheckConditions) && len(c.NodeConditions) == 0 {
				return &ConfigError{"NODE_CONDITIONS", "", "required when CHECKS has conditions: Type=Status pairs such as Ready=True,NetworkUnavailable=False"}
			}
			seen := map[string]bool{}
			for _, s := range c.NodeConditions {
				want, err := checks.ParseConditionWant(s)
				if err != nil {
					return &ConfigError{"NODE_CONDITIONS", c.NodeConditions.String(), err.Error()}
				}
				if seen[string(want.Type)] {
					return &ConfigError{"NODE_CONDITIONS", c.NodeConditions.String(), fmt.Sprintf("condition %s is named twice", want.Type)}
				}
				seen[string(want.Type)] = true
			}
			return nil
		},
		func() error {
			if c.Selected(CheckResources) && len(c.RequiredResources) == 0 {
				return &ConfigError{"REQUIRED_RESOURCES", "", "required when CHECKS has resources: name>=quantity pairs such as nvidia.com/gpu>=1"}
			}
			seen := map[string]bool{}
			for _, s := range c.RequiredResources {
				min, err := checks.ParseResourceMinimum(s)
				if err != nil {
					return &ConfigError{"REQUIRED_RESOURCES", c.RequiredResources.String(), err.Error()}
				}
				if seen[string(min.Name)] {
					return &ConfigError{"REQUIRED_RESOURCES", c.RequiredResources.String(), fmt.Sprintf("resource %s is named twice", min.Name)}
				}
				seen[string(min.Name)] = true
			}
			return nil
		},
		func() error {
			if c.Selected(CheckCSI) && len(c.CSIDrivers) == 0 {
				return &ConfigError{"CSI_DRIVERS", "", "required when CHECKS has csi: CSI driver names such as ebs.csi.aws.com"}
			}
			for _, d := range c.CSIDrivers {
				if err := checks.ValidateCSIDriverName(d); err != nil {
					return &ConfigError{"CSI_DRIVERS", d, "not a CSI driver name: " + err.Error()}
				}
			}
			return nil
		},
		func() error {
			if c.Selected(CheckDRA) && len(c.DRADevices) == 0 {
				return &ConfigError{"DRA_DEVICES", "", "required when CHECKS has dra: driver>=count pairs such as gpu.nvidia.com>=8"}
			}
			seen := map[string]bool{}
			for _, s := range c.DRADevices {
				min, err := checks.ParseDeviceMinimum(s)
				if err != nil {
					return &ConfigError{"DRA_DEVICES", c.DRADevices.String(), err.Error()}
				}
				if seen[min.Key()] {
					return &ConfigError{"DRA_DEVICES", c.DRADevices.String(), fmt.Sprintf("%s is named twice", min.String())}
				}
				seen[min.Key()] = true
			}
			return nil
		},
		func() error {
			if c.Selected(CheckCommand) && c.CommandPath == "" {
				return &ConfigError{"CHECK_COMMAND", "", "required when CHECKS has command: the absolute path of a program, such as /etc/nodeready/warmup.sh"}
			}
			if c.CommandPath != "" && !filepath.IsAbs(c.CommandPath) {
				return &ConfigError{"CHECK_COMMAND", c.CommandPath, "use the absolute path of a program, such as /etc/nodeready/warmup.sh (no shell, no PATH lookup, no arguments: those go in CHECK_COMMAND_ARGS)"}
			}
			return nil
		},
		func() error {
			if len(c.CommandArgs) > 0 && c.CommandPath == "" {
				return &ConfigError{"CHECK_COMMAND_ARGS", c.CommandArgs.String(), "arguments of CHECK_COMMAND, which is not set"}
			}
			return nil
		},
		func() error {
			if c.MinHoldTime < 0 {
				return &ConfigError{"MIN_HOLD_TIME", c.MinHoldTime.String(), "must not be negative: 0s (off) or a duration such as 30s"}
			}
			return nil
		},
	} {
		if err := v(); err != nil {
			return err
		}
	}
	return nil
}

// namespacedName checks a "namespace/name" of a namespaced object.
func namespacedName(name, value string) error {
	ns, n, ok := strings.Cut(value, "/")
	if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(n)) > 0 {
		return &ConfigError{name, value, "use namespace/name, such as kube-system/cilium"}
	}
	return nil
}
