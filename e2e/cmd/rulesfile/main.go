// Command rulesfile prints the rule groups of a PrometheusRule as a Prometheus rules file, for
// `promtool check rules` in `make vet`.
//
//	go run ./cmd/rulesfile ../manifests/monitoring/prometheusrule.yaml > rules.yaml
package main

import (
	"fmt"
	"os"

	"github.com/nodeready/nodeready/e2e/framework/rules"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: rulesfile PROMETHEUSRULE.yaml")
		os.Exit(2)
	}
	out, err := rules.RuleGroups(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "rulesfile:", err)
		os.Exit(1)
	}
	os.Stdout.Write(out)
}
