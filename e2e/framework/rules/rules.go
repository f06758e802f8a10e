// Package rules turns the shipped PrometheusRule (manifests/monitoring/prometheusrule.yaml) into
// what promtool reads: RuleGroups returns the object's groups as a rules file, so the rules
// exist once, in the object the Prometheus Operator loads. `make vet` checks them with
// `promtool check rules` (cmd/rulesfile), and e2e/static/alerts runs `promtool test rules` on
// them.
package rules

import (
	"errors"
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

// prometheusRule is the part of a monitoring.coreos.com/v1 PrometheusRule that the rules
// file needs. Decoding is strict, so a misspelt field fails rather than being dropped.
type prometheusRule struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   map[string]any `json:"metadata"`
	Spec       struct {
		Groups []map[string]any `json:"groups"`
	} `json:"spec"`
}

// RuleGroups reads the PrometheusRule at path and returns its spec.groups as a Prometheus
// rules file.
func RuleGroups(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var pr prometheusRule
	if err := yaml.UnmarshalStrict(data, &pr); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	switch {
	case pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule":
		return nil, fmt.Errorf("%s: %s %s, not a monitoring.coreos.com/v1 PrometheusRule", path, pr.APIVersion, pr.Kind)
	case len(pr.Spec.Groups) == 0:
		return nil, errors.New(path + ": no rule groups")
	}
	return yaml.Marshal(map[string]any{"groups": pr.Spec.Groups})
}
