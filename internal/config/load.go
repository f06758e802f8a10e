package config

import (
	"io"
	"slices"
	"strings"

	"github.com/nodeready/nodeready/checks"
	"github.com/nodeready/nodeready/internal/envvar"
)

// Load reads every variable from the process environment, the agent's and
// each kind of check's, checks every value and returns every bad one at once
// as Errors (errors.As finds the first *Error): those that cannot be read,
// then kube-node-ready's, the agent's own, and each kind of check's. In dry-run mode NODE_NAME may be empty, and so may the tcp check's
// targets. A variable that is not set takes its default; a blank one is read
// as kube-node-ready's flags read it (envvar).
func Load(dryRun bool) (Config, error) {
	var c Config
	var bad Errors
	if err := envvar.Read(&c); !bad.Collect(err) {
		return Config{}, err
	}
	for _, k := range checks.Catalog {
		if err := envvar.Read(k.Options(&c.Options)); !bad.Collect(err) {
			return Config{}, err
		}
	}
	// A value that could not be read keeps its default below, so that each
	// variable is judged once: a refusal never follows from another's.
	if err := c.fromKubeNodeReady(); !bad.Collect(err) {
		return Config{}, err
	}
	if err := c.validate(dryRun); !bad.Collect(err) {
		return Config{}, err
	}
	for _, k := range checks.Catalog {
		use := checks.Use{Selected: slices.Contains(c.Checks, k.Name), DryRun: dryRun}
		if err := k.Options(&c.Options).Validate(&c.Options, use); !bad.Collect(err) {
			return Config{}, err
		}
	}
	if err := bad.Err(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// MetricsPort reads METRICS_PORT alone, as Load reads it, for `nodeready
// probe`: the probe dials the port the agent listens on, and it must not fail
// because of another setting.
func MetricsPort() (int, error) {
	var s Serving
	err := envvar.Read(&s)
	return int(s.MetricsPort), err
}

// Variables lists every environment variable the agent reads: its own, then
// each kind of check's in the order of the catalog. `nodeready --help` prints
// them, and the README's configuration table is checked against them.
func Variables() []envvar.Variable {
	specs := []any{&Config{}}
	var o checks.Options
	for _, k := range checks.Catalog {
		specs = append(specs, k.Options(&o))
	}
	vars := envvar.Describe(specs...)
	for i := range vars {
		if vars[i].Name == "CHECKS" {
			vars[i].Description += " " + kinds() // from the catalog: a new kind is listed where it is added
		}
	}
	return vars
}

// kinds lists the kinds of check of the catalog as CHECKS's description tells them: the
// checks, then the gates.
func kinds() string {
	var names, gates []string
	for _, k := range checks.Catalog {
		if k.Gate {
			gates = append(gates, string(k.Name))
		} else {
			names = append(names, string(k.Name))
		}
	}
	return strings.Join(names, ", ") + ", and the gates " + strings.Join(gates, ", ")
}

// PrintVariables writes the variables as an aligned table.
func PrintVariables(w io.Writer) { envvar.Print(w, Variables()) }
