package agent

import (
	"fmt"
	"io"
	"reflect"
	"text/tabwriter"
)

// Variable documents one environment variable of Config.
type Variable struct {
	Name, Default, Description string
}

// Variables lists every environment variable the agent reads, from Config's
// struct tags, so `--help` and the README cannot drift from the code.
func Variables() []Variable {
	t := reflect.TypeFor[Config]()
	vars := make([]Variable, 0, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		vars = append(vars, Variable{Name: f.Tag.Get("envconfig"), Default: f.Tag.Get("default"), Description: f.Tag.Get("desc")})
	}
	return vars
}

// PrintVariables writes the variables as an aligned table.
func PrintVariables(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VARIABLE\tDEFAULT\tMEANING")
	for _, v := range Variables() {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", v.Name, v.Default, v.Description)
	}
	_ = tw.Flush()
}
