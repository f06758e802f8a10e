package plugin

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/nodeready/nodeready/internal/golden"
)

// TestAPINames writes the plugin's part of the names docs/stability.md promises to keep,
// from the code: its commands and their flags, the table's columns, the states, and every
// field of its machine-readable output (FleetStatus, NodeReport). The project's list and
// the rule that a change of one is in CHANGELOG.md are TestAPINames of the main package,
// which reads this file; `go test . ./cmd/... -run TestAPINames -update` rewrites both.
func TestAPINames(t *testing.T) {
	golden.Assert(t, "api", strings.Join(apiNames(), "\n")+"\n")
}

// apiNames lists the plugin's API names, one "kind name detail" line each, sorted.
func apiNames() []string {
	var names []string
	add := func(kind, name, detail string) {
		names = append(names, strings.TrimSpace(kind+" "+name+" "+detail))
	}

	// Commands and flags, but kubectl's own (the kubeconfig flags of cli-runtime).
	kubectl := map[string]bool{}
	fs := pflag.NewFlagSet("kubectl", pflag.ContinueOnError)
	genericclioptions.NewConfigFlags(true).AddFlags(fs)
	fs.VisitAll(func(f *pflag.Flag) { kubectl[f.Name] = true })
	root := (&Options{configFlags: newKubeconfigFlags()}).command("api")
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" || strings.HasPrefix(c.Name(), "__") {
			return
		}
		path := c.CommandPath() // "kubectl nodeready release"
		add("plugin-command", c.Name(), path)
		flags := func(f *pflag.Flag) {
			if kubectl[f.Name] || f.Hidden {
				return
			}
			short := ""
			if f.Shorthand != "" {
				short = "-" + f.Shorthand
			}
			add("plugin-flag", "--"+f.Name, strings.TrimSpace(path+" "+short))
		}
		c.LocalNonPersistentFlags().VisitAll(flags)
		if c == root {
			c.PersistentFlags().VisitAll(flags)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)

	for _, col := range statusTable(nil, true, now).ColumnDefinitions {
		wide := ""
		if col.Priority > 0 {
			wide = "-o wide"
		}
		add("plugin-column", strings.ToUpper(col.Name), wide)
	}
	for _, s := range states {
		add("plugin-state", string(s), "")
	}
	for _, kind := range []any{FleetStatus{}, NodeReport{}} {
		k := reflect.TypeOf(kind).Name()
		add("plugin-kind", k, GroupVersion.String())
		jsonFields(reflect.TypeOf(kind), k, func(path, field string) { add("plugin-field", field, path) })
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// opaque are the types of others that the output carries whole: their fields are theirs.
var opaque = []reflect.Type{
	reflect.TypeFor[metav1.Time](), reflect.TypeFor[corev1.NodeCondition](), reflect.TypeFor[corev1.Taint](),
}

// jsonFields calls field for each JSON field of t under prefix, depth first.
func jsonFields(t reflect.Type, prefix string, field func(path, name string)) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		if t.Kind() == reflect.Slice {
			prefix += "[]"
		}
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || slices.Contains(opaque, t) {
		return
	}
	for f := range t.Fields() {
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" || !f.IsExported() {
			continue
		}
		if f.Anonymous && tag == "" {
			jsonFields(f.Type, prefix, field) // inline, as TypeMeta's kind and apiVersion
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		path := fmt.Sprintf("%s.%s", prefix, tag)
		field(path, tag)
		jsonFields(f.Type, path, field)
	}
}
