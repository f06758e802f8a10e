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
		func() (err error) {
			c.NodeConditions, err = parseTargets("NODE_CONDITIONS", l.conditions, c.selected(checks.NameConditions),
				"required when CHECKS has conditions: Type=Status pairs such as Ready=True,NetworkUnavailable=False",
				checks.ParseConditionWant,
				func(w checks.ConditionWant) string { return string(w.Type) },
				func(w checks.ConditionWant) string { return fmt.Sprintf("condition %s", w.Type) })
			return err
		},
		func() (err error) {
			c.RequiredResources, err = parseTargets("REQUIRED_RESOURCES", l.resources, c.selected(checks.NameResources),
				"required when CHECKS has resources: name>=quantity pairs such as nvidia.com/gpu>=1",
				checks.ParseResourceMinimum,
				func(m checks.ResourceMinimum) string { return string(m.Name) },
				func(m checks.ResourceMinimum) string { return fmt.Sprintf("resource %s", m.Name) })
			return err
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
		func() (err error) {
			// Minimums of one driver and attribute value are the same target, whatever their counts.
			c.DRADevices, err = parseTargets("DRA_DEVICES", l.devices, c.selected(checks.NameDRA),
				"required when CHECKS has dra: driver>=count pairs such as gpu.nvidia.com>=8",
				checks.ParseDeviceMinimum, checks.DeviceMinimum.Key, checks.DeviceMinimum.String)
			return err
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

// parseTargets parses the targets a gate's variable lists, each with parse.
// The list is required (what to write says required) when the gate is
// selected, and no two targets may share a key; named names the one named
// twice in the message.
func parseTargets[T any](variable string, values []string, selected bool, required string,
	parse func(string) (T, error), key, named func(T) string,
) ([]T, error) {
	if selected && len(values) == 0 {
		return nil, &Error{variable, "", required}
	}
	var list []T
	seen := map[string]bool{}
	for _, s := range values {
		t, err := parse(s)
		if err != nil {
			return nil, &Error{variable, join(values), err.Error()}
		}
		if seen[key(t)] {
			return nil, &Error{variable, join(values), named(t) + " is named twice"}
		}
		seen[key(t)] = true
		list = append(list, t)
	}
	return list, nil
}
