package config

import (
	"fmt"
	"path/filepath"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/nodeready/nodeready/checks"
)

// validateGates checks and parses the settings of the gates (daemonsets,
// conditions, resources, csi, dra, command, and MIN_HOLD_TIME), whether or
// not CHECKS names them, so a mistake shows before the gate is turned on.
func (l *loader) validateGates() error {
	c := &l.c
	for _, v := range []func() error{
		func() error {
			for _, key := range c.DaemonSets {
				if err := namespacedName("DAEMONSETS", key); err != nil {
					return err
				}
			}
			return nil
		},
		func() (err error) {
			if c.DaemonSetsSelector, err = labels.Parse(l.daemonSetsSelector); err != nil {
				return &Error{"DAEMONSETS_SELECTOR", l.daemonSetsSelector, "not a label selector: use a form such as tier=node, app in (cni,csi) or !example.com/optional"}
			}
			if l.daemonSetsSelector != "" && len(c.DaemonSets) > 0 {
				return &Error{"DAEMONSETS_SELECTOR", l.daemonSetsSelector, "limits discovery only: leave it empty when DAEMONSETS lists the DaemonSets"}
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
				return &Error{"DAEMONSETS_EXCLUDE", join(c.DaemonSetsExclude), "limits discovery only: leave it empty when DAEMONSETS lists the DaemonSets"}
			}
			return nil
		},
		func() error {
			if c.selected(checks.NameConditions) && len(l.conditions) == 0 {
				return &Error{"NODE_CONDITIONS", "", "required when CHECKS has conditions: Type=Status pairs such as Ready=True,NetworkUnavailable=False"}
			}
			for _, s := range l.conditions {
				want, err := checks.ParseConditionWant(s)
				if err != nil {
					return &Error{"NODE_CONDITIONS", join(l.conditions), err.Error()}
				}
				for _, o := range c.NodeConditions {
					if o.Type == want.Type {
						return &Error{"NODE_CONDITIONS", join(l.conditions), fmt.Sprintf("condition %s is named twice", want.Type)}
					}
				}
				c.NodeConditions = append(c.NodeConditions, want)
			}
			return nil
		},
		func() error {
			if c.selected(checks.NameResources) && len(l.resources) == 0 {
				return &Error{"REQUIRED_RESOURCES", "", "required when CHECKS has resources: name>=quantity pairs such as nvidia.com/gpu>=1"}
			}
			for _, s := range l.resources {
				min, err := checks.ParseResourceMinimum(s)
				if err != nil {
					return &Error{"REQUIRED_RESOURCES", join(l.resources), err.Error()}
				}
				for _, o := range c.RequiredResources {
					if o.Name == min.Name {
						return &Error{"REQUIRED_RESOURCES", join(l.resources), fmt.Sprintf("resource %s is named twice", min.Name)}
					}
				}
				c.RequiredResources = append(c.RequiredResources, min)
			}
			return nil
		},
		func() error {
			if c.selected(checks.NameCSI) && len(c.CSIDrivers) == 0 {
				return &Error{"CSI_DRIVERS", "", "required when CHECKS has csi: CSI driver names such as ebs.csi.aws.com"}
			}
			for _, d := range c.CSIDrivers {
				if err := checks.ValidateCSIDriverName(d); err != nil {
					return &Error{"CSI_DRIVERS", d, "not a CSI driver name: " + err.Error()}
				}
			}
			return nil
		},
		func() error {
			if c.selected(checks.NameDRA) && len(l.devices) == 0 {
				return &Error{"DRA_DEVICES", "", "required when CHECKS has dra: driver>=count pairs such as gpu.nvidia.com>=8"}
			}
			for _, s := range l.devices {
				min, err := checks.ParseDeviceMinimum(s)
				if err != nil {
					return &Error{"DRA_DEVICES", join(l.devices), err.Error()}
				}
				for _, o := range c.DRADevices {
					if o.Key() == min.Key() {
						return &Error{"DRA_DEVICES", join(l.devices), fmt.Sprintf("%s is named twice", min.String())}
					}
				}
				c.DRADevices = append(c.DRADevices, min)
			}
			return nil
		},
		func() error {
			if c.selected(checks.NameCommand) && c.CommandPath == "" {
				return &Error{"CHECK_COMMAND", "", "required when CHECKS has command: the absolute path of a program, such as /etc/nodeready/warmup.sh"}
			}
			if c.CommandPath != "" && !filepath.IsAbs(c.CommandPath) {
				return &Error{"CHECK_COMMAND", c.CommandPath, "use the absolute path of a program, such as /etc/nodeready/warmup.sh (no shell, no PATH lookup, no arguments: those go in CHECK_COMMAND_ARGS)"}
			}
			return nil
		},
		func() error {
			if len(c.CommandArgs) > 0 && c.CommandPath == "" {
				return &Error{"CHECK_COMMAND_ARGS", join(c.CommandArgs), "arguments of CHECK_COMMAND, which is not set"}
			}
			return nil
		},
		func() error {
			if c.MinHoldTime < 0 {
				return &Error{"MIN_HOLD_TIME", c.MinHoldTime.String(), "must not be negative: 0s (off) or a duration such as 30s"}
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
