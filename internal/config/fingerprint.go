package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"time"

	"github.com/nodeready/nodeready/checks"
)

// Fingerprint names what the checks of this configuration test, so that agents
// compare their node only with nodes checked the same way: a node verified
// under other checks, targets or timeouts proves nothing about this
// configuration (docs/checks.md, "Whose fault it is"). It is the first 10 hex
// digits of the SHA-256 of CHECKS, CHECK_TIMEOUT and every kind's variables as
// read (after kube-node-ready's names are resolved): any change to them is a
// new configuration, also of a kind CHECKS does not name, which only makes the
// evidence start again. The failure policy, the label, the taint and the logs
// are not part of it, nor the variables a node may set to a value of its own
// (perNode).
func (c *Config) Fingerprint() string {
	values := map[string]any{"CHECKS": c.Checks, "CHECK_TIMEOUT": c.CheckTimeout.String()}
	for _, k := range checks.Catalog {
		addVariables(values, reflect.ValueOf(k.Options(&c.Options)).Elem())
	}
	b, err := json.Marshal(values) // map keys sorted: the same values, the same bytes
	if err != nil {
		panic("config fingerprint: " + err.Error()) // variables are strings, numbers, durations and lists
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:10]
}

// perNode are the variables whose value may be the node's own while every node
// does the same with it: DNS_NAMESERVER is a node-local DNS cache, often the node's
// own address (the downward API's status.hostIP), on every node alike.
var perNode = map[string]bool{"DNS_NAMESERVER": true}

// addVariables adds the values of the variables of an options struct: its fields
// with an envconfig name. The fields a kind derives from them (`ignored`) are left
// out: they say the same, and some (an HTTP client) are no values.
func addVariables(values map[string]any, v reflect.Value) {
	for i := range v.NumField() {
		f := v.Type().Field(i)
		name, ok := f.Tag.Lookup("envconfig")
		if !ok || !f.IsExported() || f.Tag.Get("ignored") == "true" {
			continue
		}
		if perNode[name] {
			continue
		}
		if d, ok := v.Field(i).Interface().(time.Duration); ok {
			values[name] = d.String()
			continue
		}
		values[name] = v.Field(i).Interface()
	}
}
