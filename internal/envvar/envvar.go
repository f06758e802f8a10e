// Package envvar reads nodeready's environment variables through
// github.com/kelseyhightower/envconfig. A variable is a field of a struct:
// its tags give its name (`envconfig`), its default (`default`) and what it
// means (`desc`), so each is defined once, where its value goes. Read fills
// such a struct from the process environment and names the variable of a
// value it cannot read; Describe lists the variables for `nodeready --help`
// and the README's table.
//
// A blank value is read as kube-node-ready's flags (urfave/cli v3) read it,
// so that its ConfigMaps work unchanged: for a number, a duration, a boolean
// or a list it means the default, for text it is the value itself, and a
// field's `blank` tag says otherwise where kube-node-ready did (`blank:"false"`
// for ENABLE_METRICS, `blank:"default"` for LOG_LEVEL and LOG_FORMAT, which it
// never read).
package envvar

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/kelseyhightower/envconfig"
)

// Error is a bad environment variable: which one, its value, and what is
// accepted. Its message is the one line the agent prints before exit 2.
type Error struct {
	Var, Value, Accepted string
}

func (e *Error) Error() string {
	return fmt.Sprintf("invalid configuration: %s=%q: %s", e.Var, e.Value, e.Accepted)
}

// Variable documents one environment variable.
type Variable struct {
	Name, Default, Description string
	// Text: a blank value is the value itself, not the default.
	Text bool
	// Blank is what a blank value means when its `blank` tag says: "default",
	// or a value.
	Blank string
}

// Describe lists the variables of the specs, pointers to structs, in the
// order of their fields.
func Describe(specs ...any) []Variable {
	var vars []Variable
	for _, spec := range specs {
		var out bytes.Buffer
		// One variable per line, its parts separated by a byte no tag holds.
		format := "{{range .}}{{usage_key .}}\x1f{{usage_default .}}\x1f{{usage_description .}}\x1f{{usage_type .}}\x1f{{.Tags.Get \"blank\"}}\n{{end}}"
		if err := envconfig.Usagef("", spec, &out, format); err != nil {
			panic(err) // a spec that is not a pointer to a struct: a programming error
		}
		for line := range strings.Lines(out.String()) {
			f := strings.Split(strings.TrimSuffix(line, "\n"), "\x1f")
			vars = append(vars, Variable{Name: f[0], Default: f[1], Description: f[2], Text: f[3] == "String", Blank: f[4]})
		}
	}
	return vars
}

// Print writes the variables as an aligned table, as `nodeready --help` shows them.
func Print(w io.Writer, vars []Variable) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VARIABLE\tDEFAULT\tMEANING")
	for _, v := range vars {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", v.Name, v.Default, v.Description)
	}
	_ = tw.Flush()
}

// Read fills spec, a pointer to a struct, from the process environment. A
// blank value is first read as the package doc says: where it means the
// default the variable is unset, and where its `blank` tag gives a value it
// takes that value. A value that cannot be read is an *Error.
func Read(spec any) error {
	for _, v := range Describe(spec) {
		if value, set := os.LookupEnv(v.Name); !set || value != "" {
			continue
		}
		var err error
		switch {
		case v.Blank == "default" || (v.Blank == "" && !v.Text):
			err = os.Unsetenv(v.Name)
		case v.Blank != "":
			err = os.Setenv(v.Name, v.Blank)
		}
		if err != nil {
			return err
		}
	}
	err := envconfig.Process("", spec)
	var pe *envconfig.ParseError
	if errors.As(err, &pe) {
		return &Error{Var: pe.KeyName, Value: pe.Value, Accepted: accepted(pe)}
	}
	return err
}

// accepted says what a variable of the field's type accepts.
func accepted(pe *envconfig.ParseError) string {
	var named interface{ Accepted() string }
	if errors.As(pe.Err, &named) {
		return named.Accepted()
	}
	switch pe.TypeName {
	case "time.Duration":
		return "not a duration: use a number with a unit, such as 10s, 5m or 1h30m"
	case "bool":
		return "use true or false"
	case "int":
		return WholeNumber
	}
	return pe.Err.Error()
}

// WholeNumber is what a whole number accepts: Go's syntax, 0x10 and 0o20 included.
const WholeNumber = "not a whole number"

// List is a comma-separated list. Items are trimmed and empty items dropped,
// so "a, b," is [a b].
type List []string

// Decode implements envconfig.Decoder.
func (l *List) Decode(v string) error {
	*l = nil
	for item := range strings.SplitSeq(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			*l = append(*l, item)
		}
	}
	return nil
}

// String writes the list as it is read.
func (l List) String() string { return strings.Join(l, ",") }

// Port is a TCP port in decimal, 1 to 65535, written as strconv.Itoa writes
// it: "010", "+80" and "0x1F90" are refused rather than read one way here and
// another by people.
type Port int

// PortAccepted is what a Port accepts.
const PortAccepted = "must be a port from 1 to 65535, in decimal without leading zeros"

// Decode implements envconfig.Decoder.
func (p *Port) Decode(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != v {
		return portError{}
	}
	*p = Port(n)
	return nil
}

type portError struct{}

func (portError) Error() string    { return PortAccepted }
func (portError) Accepted() string { return PortAccepted }
