package config

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// Lookup returns the value of an environment variable and whether it is set:
// os.LookupEnv, or MapLookup in tests and in-process agents.
type Lookup func(name string) (string, bool)

// MapLookup looks variables up in env, as a process environment of exactly
// those variables would.
func MapLookup(env map[string]string) Lookup {
	return func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	}
}

// Load reads every variable through lookup, checks every value and returns
// the first bad one as an *Error. In dry-run mode NODE_NAME may be empty, and
// so may the tcp check's targets.
//
// A variable that is not set takes its default. An empty one is read as
// kube-node-ready's flags (urfave/cli v3) read it, so that its ConfigMaps work
// unchanged: for numbers, durations, booleans and lists it means the default,
// and for text it is the value itself, except where compat.go says otherwise.
func Load(lookup Lookup, dryRun bool) (Config, error) {
	l := &loader{dryRun: dryRun}
	for _, v := range l.variables() {
		if err := v.load(lookup); err != nil {
			return Config{}, err
		}
	}
	if err := l.fromKubeNodeReady(lookup); err != nil {
		return Config{}, err
	}
	if err := l.validate(); err != nil {
		return Config{}, err
	}
	return l.c, nil
}

// MetricsPort reads METRICS_PORT alone, as Load reads it, for `nodeready
// probe`: the probe dials the port the agent listens on, and it must not fail
// because of another setting.
func MetricsPort(lookup Lookup) (int, error) {
	var l loader
	for _, v := range l.variables() {
		if v.Name == "METRICS_PORT" {
			if err := v.load(lookup); err != nil {
				return 0, err
			}
		}
	}
	return l.c.MetricsPort, nil
}

// loader is one Load: the configuration it fills, and the values that
// validate turns into typed fields of it, as read.
type loader struct {
	c      Config
	dryRun bool

	taintKey, taintValue, taintEffect string
	extraTaints                       []string
	checks                            []string
	clusterDNS                        string
	tcpTargets                        []string
	serviceHost, servicePort          string
	httpStatus, httpCAFile            string
	endpoints                         string
	podNetworkService, podNetworkPort string
	podNetworkPath                    string
	daemonSetsSelector                string
	conditions, resources, devices    []string
	deleteFailedNode                  bool
}

// variable is one environment variable and how its value is read.
type variable struct {
	Variable
	read reader
}

// load reads the variable's value, or its default, into its place.
func (v variable) load(lookup Lookup) error {
	value, set := lookup(v.Name)
	empty, emptySpecial := emptyMeans[v.Name]
	switch {
	case set && value == "" && emptySpecial:
		value = empty
	case set && (value != "" || v.read.text):
		// the value as it is
	case v.Default == "":
		return nil // the zero value
	default:
		value = v.Default
	}
	if err := v.read.set(value); err != nil {
		return &Error{Var: v.Name, Value: value, Accepted: v.read.accepted}
	}
	return nil
}

// reader parses a variable's value into its place.
type reader struct {
	text     bool   // an empty value is the value itself, not the default
	accepted string // what is accepted, for the message when set fails
	set      func(string) error
}

func text(p *string) reader {
	return reader{text: true, set: func(v string) error { *p = v; return nil }}
}

// list reads a comma-separated list. Items are trimmed and empty items
// dropped, so "a, b," is [a b].
func list(p *[]string) reader {
	return reader{set: func(v string) error { *p = splitList(v); return nil }}
}

func splitList(v string) []string {
	var l []string
	for item := range strings.SplitSeq(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			l = append(l, item)
		}
	}
	return l
}

func duration(p *time.Duration) reader {
	return reader{accepted: "not a duration: use a number with a unit, such as 10s, 5m or 1h30m", set: func(v string) (err error) {
		*p, err = time.ParseDuration(v)
		return err
	}}
}

const wholeNumber = "not a whole number"

// integer reads a whole number as Go writes one, 0x10 and 0o20 included.
func integer(p *int) reader {
	return reader{accepted: wholeNumber, set: func(v string) error {
		n, err := strconv.ParseInt(v, 0, strconv.IntSize)
		*p = int(n)
		return err
	}}
}

func boolean(p *bool) reader {
	return reader{accepted: "use true or false", set: func(v string) (err error) {
		*p, err = strconv.ParseBool(v)
		return err
	}}
}

// port reads a TCP port as METRICS_PORT gives it, with parsePort. integer
// would read Go's base prefixes (010 as 8, 0x1F90 as 8080) where people read
// decimal.
func port(p *int) reader {
	return reader{accepted: portAccepted, set: func(v string) (err error) {
		*p, err = parsePort(v)
		return err
	}}
}

const portAccepted = "must be a port from 1 to 65535, in decimal without leading zeros"

// parsePort reads a port in decimal, 1 to 65535, written as strconv.Itoa writes it: "010",
// "+80" and "0x1F90" are refused rather than read one way here and another elsewhere.
func parsePort(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != v {
		return 0, errors.New(portAccepted)
	}
	return n, nil
}
