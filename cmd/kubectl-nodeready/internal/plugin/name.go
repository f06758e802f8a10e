package plugin

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// setName lays --name under --config-map and --agent-selector: the objects of an install
// renamed by the chart's nameOverride are found by the name, as the chart names them.
func (o *Options) setName() error {
	if o.nameFlags == nil {
		return nil
	}
	name, configMap, agentSelector := o.nameFlags()
	if !name {
		return nil
	}
	if errs := validation.IsDNS1123Label(o.name); len(errs) > 0 {
		return fmt.Errorf("--name %q: %s", o.name, strings.Join(errs, "; "))
	}
	if !configMap {
		o.keys.configMap = o.name + "-config"
	}
	if !agentSelector {
		o.agentSelector = "app.kubernetes.io/name=" + o.name
	}
	return nil
}
