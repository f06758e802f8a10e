package agent

import (
	"errors"
	"fmt"
	"os"
	"reflect"

	"github.com/kelseyhightower/envconfig"
)

// lookupFunc is os.LookupEnv, or a map in tests.
type lookupFunc func(string) (string, bool)

// loadEnv fills c from the environment with envconfig. An empty value is
// read as kube-node-ready's flags (urfave/cli v3) read it, so that its
// ConfigMaps work unchanged: for numbers, durations, booleans and lists it
// means the default, and for text it is the value itself. envconfig would
// parse the empty value instead, so such variables are unset in this
// process first. The empty tag overrides both where kube-node-ready
// differed: an empty ENABLE_METRICS was false there, and it never used
// LOG_LEVEL or LOG_FORMAT at all.
func loadEnv(c *Config) error {
	t := reflect.TypeFor[Config]()
	for i := range t.NumField() {
		f := t.Field(i)
		name := f.Tag.Get("envconfig")
		if v, set := os.LookupEnv(name); !set || v != "" {
			continue
		}
		var err error
		switch {
		case f.Tag.Get("empty") != "":
			err = os.Setenv(name, f.Tag.Get("empty"))
		case f.Type.Kind() != reflect.String:
			err = os.Unsetenv(name)
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", name, err)
		}
	}
	if err := envconfig.Process("", c); err != nil {
		var pe *envconfig.ParseError
		if errors.As(err, &pe) {
			return &ConfigError{Var: pe.KeyName, Value: pe.Value, Accepted: acceptedType(pe.TypeName)}
		}
		return fmt.Errorf("invalid configuration: %w", err)
	}
	return nil
}
