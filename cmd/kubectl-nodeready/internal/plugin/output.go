package plugin

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/printers"
)

// outputFlags are kubectl's -o and its template flags (--template,
// --allow-missing-template-keys, --show-managed-fields), read as cli-runtime's PrintFlags
// reads them (TestOutputFlagsAreKubectls) and printed by its printers. PrintFlags itself is
// not used: its package brings kustomize and every API group into the plugin for each
// platform of the release.
type outputFlags struct {
	format            string
	template          string
	allowMissingKeys  bool
	showManagedFields bool
	formatGiven       func() bool
}

// The formats that print a template of the object; json, yaml and kyaml print it whole.
var templateFormats = []string{"go-template", "go-template-file", "template", "templatefile", "jsonpath", "jsonpath-as-json", "jsonpath-file"}

func newOutputFlags() *outputFlags { return &outputFlags{allowMissingKeys: true} }

// addFlags registers -o and the template flags on cmd.
func (f *outputFlags) addFlags(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.showManagedFields, "show-managed-fields", false, "If true, keep the managedFields when printing objects in JSON or YAML format.")
	cmd.Flags().StringVar(&f.template, "template", "", "Template string or path to template file to use when -o=go-template, -o=go-template-file. The template format is golang templates [http://golang.org/pkg/text/template/#pkg-overview].")
	_ = cmd.MarkFlagFilename("template")
	cmd.Flags().BoolVar(&f.allowMissingKeys, "allow-missing-template-keys", true, "If true, ignore any errors in templates when a field or map key is missing in the template. Only applies to golang and jsonpath output formats.")
	cmd.Flags().StringVarP(&f.format, "output", "o", "", fmt.Sprintf("Output format. One of: (%s).", strings.Join(formats(), ", ")))
	f.formatGiven = func() bool { return cmd.Flag("output").Changed }
}

// formats are the output formats, in kubectl's order.
func formats() []string { return slices.Concat([]string{"json", "yaml", "kyaml"}, templateFormats) }

// printer is the printer of -o, or of --template alone (a Go template).
func (f *outputFlags) printer() (printers.ResourcePrinter, error) {
	format := f.format
	if f.template != "" && !f.formatGiven() {
		format = "go-template"
	}
	if p := objectPrinter(format, f.showManagedFields); p != nil {
		return p, nil
	}
	template := f.template
	if name, value, ok := strings.Cut(format, "="); ok && template == "" && slices.Contains(templateFormats, name) {
		format, template = name, value
	}
	if !slices.Contains(templateFormats, format) {
		return nil, fmt.Errorf("unable to match a printer suitable for the output format %q, allowed formats are: %s", format, strings.Join(slices.Sorted(slices.Values(formats())), ","))
	}
	if template == "" {
		return nil, fmt.Errorf("template format specified but no template given")
	}
	if strings.HasSuffix(format, "file") {
		data, err := os.ReadFile(template)
		if err != nil {
			return nil, fmt.Errorf("error reading --template %s, %v", template, err)
		}
		template = string(data)
	}
	if strings.HasPrefix(format, "jsonpath") {
		p, err := printers.NewJSONPathPrinter(template)
		if err != nil {
			return nil, fmt.Errorf("error parsing jsonpath %s, %v", template, err)
		}
		p.AllowMissingKeys(f.allowMissingKeys)
		p.EnableJSONOutput(format == "jsonpath-as-json")
		return p, nil
	}
	p, err := printers.NewGoTemplatePrinter([]byte(template))
	if err != nil {
		return nil, fmt.Errorf("error parsing template %s, %v", template, err)
	}
	p.AllowMissingKeys(f.allowMissingKeys)
	return p, nil
}

// objectPrinter prints the whole object for -o json, yaml or kyaml, in any case as kubectl
// takes them, without its managedFields unless asked; it is nil for any other format.
func objectPrinter(format string, showManagedFields bool) printers.ResourcePrinter {
	var p printers.ResourcePrinter
	switch strings.ToLower(format) {
	case "json":
		p = &printers.JSONPrinter{}
	case "yaml":
		p = &printers.YAMLPrinter{}
	case "kyaml":
		p = &printers.KYAMLPrinter{}
	default:
		return nil
	}
	if !showManagedFields {
		p = &printers.OmitManagedFieldsPrinter{Delegate: p}
	}
	return p
}
