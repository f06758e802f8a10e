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
	"encoding"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
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
// order of their fields, as envconfig finds them: a field's name is its
// `envconfig` tag, else its own name, upper-cased; `ignored` and unexported
// fields are skipped; a struct field that reads no value itself (no Decode,
// Set, UnmarshalText or UnmarshalBinary) holds more variables, under its own
// name unless it is embedded. envconfig's Usage would tell the same through
// text/template, whose calls of methods by name make the linker keep every
// exported method of every type in the binary: with the typed clientset's
// types, 60% of its size (TestDescribeAgreesWithEnvconfig).
func Describe(specs ...any) []Variable {
	var vars []Variable
	for _, spec := range specs {
		t := reflect.TypeOf(spec)
		if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
			panic(fmt.Sprintf("envvar: %T is not a pointer to a struct", spec)) // a programming error
		}
		vars = describe(vars, "", t.Elem())
	}
	return vars
}

// readers are the interfaces through which envconfig lets a type read its own value.
var readers = []reflect.Type{
	reflect.TypeFor[envconfig.Decoder](),
	reflect.TypeFor[envconfig.Setter](),
	reflect.TypeFor[encoding.TextUnmarshaler](),
	reflect.TypeFor[encoding.BinaryUnmarshaler](),
}

func describe(vars []Variable, prefix string, t reflect.Type) []Variable {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || isTrue(f.Tag.Get("ignored")) {
			continue
		}
		if isTrue(f.Tag.Get("split_words")) {
			panic("envvar: split_words is not supported: name the variable with an envconfig tag") // a programming error
		}
		key := f.Name
		if alt := f.Tag.Get("envconfig"); alt != "" {
			key = alt
		}
		if prefix != "" {
			key = prefix + "_" + key
		}
		key = strings.ToUpper(key)
		ft := f.Type
		for ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && !readsItself(ft) {
			inner := key
			if f.Anonymous {
				inner = prefix
			}
			vars = describe(vars, inner, ft)
			continue
		}
		text := (ft.Kind() == reflect.String && ft.Name() == "string") ||
			((ft.Kind() == reflect.Slice || ft.Kind() == reflect.Array) && ft.Elem().Kind() == reflect.Uint8)
		vars = append(vars, Variable{Name: key, Default: f.Tag.Get("default"), Description: f.Tag.Get("desc"),
			Text: text, Blank: f.Tag.Get("blank")})
	}
	return vars
}

// readsItself tells a struct type that envconfig gives the variable's value to.
func readsItself(t reflect.Type) bool {
	for _, r := range readers {
		if reflect.PointerTo(t).Implements(r) {
			return true
		}
	}
	return false
}

// isTrue reads a boolean tag as envconfig does.
func isTrue(s string) bool {
	b, _ := strconv.ParseBool(s)
	return b
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

// Errors is every bad variable of a configuration, in the order they were
// found: the agent names them all at once, one line each, so that a ConfigMap
// with several mistakes is mended in one go. errors.As finds the first
// *Error.
type Errors []*Error

func (e Errors) Error() string {
	lines := make([]string, len(e))
	for i, err := range e {
		lines[i] = err.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap gives the *Errors to errors.Is and errors.As.
func (e Errors) Unwrap() []error {
	errs := make([]error, len(e))
	for i, err := range e {
		errs[i] = err
	}
	return errs
}

// Collect adds err to errs: an *Error or Errors, every one of them; nil adds
// nothing. It reports false for any other error, which the caller returns as
// it is.
func (e *Errors) Collect(err error) bool {
	var one *Error
	var many Errors
	switch {
	case err == nil:
	case errors.As(err, &many):
		*e = append(*e, many...)
	case errors.As(err, &one):
		*e = append(*e, one)
	default:
		return false
	}
	return true
}

// Err is the Errors as an error: nil when there are none.
func (e Errors) Err() error {
	if len(e) == 0 {
		return nil
	}
	return e
}

// Read fills spec, a pointer to a struct, from the process environment. A
// blank value is first read as the package doc says: where it means the
// default the variable is unset, and where its `blank` tag gives a value it
// takes that value. A value that cannot be read is an *Error; every such
// value is, as Errors, and its field keeps its default meanwhile, so that
// what follows can still check the others.
func Read(spec any) error {
	var bad Errors
	for {
		err := read(spec)
		var pe *envconfig.ParseError
		if !errors.As(err, &pe) {
			if err != nil {
				return err
			}
			return bad.Err()
		}
		bad = append(bad, &Error{Var: pe.KeyName, Value: pe.Value, Accepted: accepted(pe)})
		if _, set := os.LookupEnv(pe.KeyName); !set {
			return bad // a default that does not parse: a programming error, and no pass would end
		}
		// envconfig stops at the first value it cannot parse: read again without
		// it, and put it back for whatever reads the environment after.
		if err := os.Unsetenv(pe.KeyName); err != nil {
			return err
		}
		defer os.Setenv(pe.KeyName, pe.Value) //nolint:errcheck // it was set a moment ago
	}
}

// read is one pass of envconfig over spec.
func read(spec any) error {
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
	return envconfig.Process("", spec)
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
