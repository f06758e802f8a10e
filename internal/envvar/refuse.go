package envvar

import (
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The refusals that several variables share. Each returns nil or an *Error
// that names the variable.

// OneOf refuses a value that is not one of accepted.
func OneOf(name, value string, accepted []string) error {
	if slices.Contains(accepted, value) {
		return nil
	}
	return &Error{name, value, "use one of " + strings.Join(accepted, ", ")}
}

// Positive refuses a duration that is not longer than 0.
func Positive(name string, d time.Duration) error {
	if d > 0 {
		return nil
	}
	return &Error{name, d.String(), "must be longer than 0, such as 10s"}
}

// AtLeast refuses a number below least.
func AtLeast(name string, n, least int) error {
	if n >= least {
		return nil
	}
	return &Error{name, strconv.Itoa(n), "must be at least " + strconv.Itoa(least)}
}

// QualifiedName refuses a value that is not a valid label or taint key.
func QualifiedName(name, value string) error {
	if errs := validation.IsQualifiedName(value); len(errs) > 0 {
		return &Error{name, value, "not a valid label or taint key: " + strings.Join(errs, "; ")}
	}
	return nil
}

// LabelValue refuses a value that is not a valid label or taint value.
func LabelValue(name, value string) error {
	if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
		return &Error{name, value, "not a valid label or taint value: " + strings.Join(errs, "; ")}
	}
	return nil
}

// DNSName refuses a value that is not a DNS subdomain (RFC 1123); it returns
// an *Error, typed so that a caller can adjust it.
func DNSName(name, value string) *Error {
	if errs := validation.IsDNS1123Subdomain(value); len(errs) > 0 {
		return &Error{name, value, "not a valid DNS name: " + strings.Join(errs, "; ")}
	}
	return nil
}

// HostPort refuses a value that is not host:port with a port from 1 to 65535.
func HostPort(name, value string) error {
	host, port, err := net.SplitHostPort(value)
	if err == nil && host != "" {
		if p, perr := strconv.Atoi(port); perr == nil && p >= 1 && p <= 65535 {
			return nil
		}
	}
	return &Error{name, value, "use host:port, such as 10.96.0.1:443 or [fd00::1]:443"}
}

// NamespacedName refuses a value that is not namespace/name of a namespaced object.
func NamespacedName(name, value string) error {
	ns, n, ok := strings.Cut(value, "/")
	if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(n)) > 0 {
		return &Error{name, value, "use namespace/name, such as kube-system/cilium"}
	}
	return nil
}

// Service reads namespace/name of a Service, a bare name being in namespace,
// and refuses anything else with example, what to write.
func Service(name, value, namespace, example string) (types.NamespacedName, error) {
	ref := types.NamespacedName{Namespace: namespace, Name: value}
	if ns, n, ok := strings.Cut(value, "/"); ok {
		ref = types.NamespacedName{Namespace: ns, Name: n}
	}
	if len(validation.IsDNS1123Label(ref.Namespace)) > 0 || len(validation.IsDNS1123Label(ref.Name)) > 0 {
		return types.NamespacedName{}, &Error{name, value, "use namespace/name of a Service, such as " + example}
	}
	return ref, nil
}

// Required refuses an empty value of a variable that what needs.
func Required(name, what string) error {
	return &Error{name, "", "required when " + what}
}
