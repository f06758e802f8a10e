package agent

import (
	"fmt"
	"reflect"
	"strconv"
	"time"
)

// lookupFunc is os.LookupEnv, or a map in tests.
type lookupFunc func(string) (string, bool)

// decoder is a type that reads itself from a variable's value, such as List.
type decoder interface{ Decode(value string) error }

// loadEnv fills c from the environment through its struct tags: envconfig
// names the variable, default is its value when it is unset. An empty value
// is read as kube-node-ready's flags (urfave/cli v3) read it, so that its
// ConfigMaps work unchanged: for numbers, durations, booleans and lists it
// means the default, and for text it is the value itself. The empty tag
// overrides both where kube-node-ready differed: an empty ENABLE_METRICS was
// false there, and it never used LOG_LEVEL or LOG_FORMAT at all.
func loadEnv(c *Config, lookup lookupFunc) error {
	v := reflect.ValueOf(c).Elem()
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name := f.Tag.Get("envconfig")
		value, set := lookup(name)
		switch {
		case !set:
			value = f.Tag.Get("default")
		case value != "":
		case f.Tag.Get("empty") != "":
			value = f.Tag.Get("empty")
		case f.Type.Kind() != reflect.String:
			value = f.Tag.Get("default")
		}
		if value == "" && f.Type.Kind() != reflect.String {
			continue // no default: the zero value
		}
		if err := decodeField(v.Field(i), value); err != nil {
			return &ConfigError{Var: name, Value: value, Accepted: acceptedType(f.Type.String())}
		}
	}
	return nil
}

// decodeField parses value into field with the syntax envconfig used before:
// Go durations, strconv's integers (base prefixes too) and booleans.
func decodeField(field reflect.Value, value string) error {
	if d, ok := field.Addr().Interface().(decoder); ok {
		return d.Decode(value)
	}
	if field.Type() == reflect.TypeFor[time.Duration]() {
		d, err := time.ParseDuration(value)
		field.SetInt(int64(d))
		return err
	}
	switch field.Kind() {
	case reflect.String:
		field.SetString(value)
	case reflect.Int:
		n, err := strconv.ParseInt(value, 0, strconv.IntSize)
		field.SetInt(n)
		return err
	case reflect.Bool:
		b, err := strconv.ParseBool(value)
		field.SetBool(b)
		return err
	default:
		return fmt.Errorf("unsupported type %s", field.Type())
	}
	return nil
}
