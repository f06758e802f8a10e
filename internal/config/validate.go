package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nodeready/nodeready/checks"
	"github.com/nodeready/nodeready/internal/wellknown"
)

var (
	taintEffects = []string{string(corev1.TaintEffectNoSchedule), string(corev1.TaintEffectPreferNoSchedule), string(corev1.TaintEffectNoExecute)}
	taintOwners  = []string{TaintOwnerNodeready, TaintOwnerExternal}
	backoffs     = []string{"exponential", "linear", "constant"}
	failures     = []string{KeepTainted, FailOpen, ReplaceNode}
	logLevels    = []string{"trace", "debug", "info", "warn", "error"}
	logFormats   = []string{"json", "console"}
)

// validate checks every value, parses the ones the agent uses parsed, and
// returns the first bad one as an *Error.
func (l *loader) validate() error {
	c := &l.c
	for _, v := range []func() error{
		func() error {
			if c.NodeName == "" && !l.dryRun {
				return &Error{"NODE_NAME", "", "required: set it from the downward API (fieldRef spec.nodeName), or use --dry-run"}
			}
			if err := dns1123("NODE_NAME", c.NodeName, true); err != nil {
				return err
			}
			return nil
		},
		func() error { return qualifiedName("TAINT_KEY", l.taintKey) },
		func() error { return labelValue("TAINT_VALUE", l.taintValue) },
		func() error { return oneOf("TAINT_EFFECT", l.taintEffect, taintEffects) },
		l.startupTaints,
		func() error { return oneOf("TAINT_OWNER", c.TaintOwner, taintOwners) },
		func() error {
			if err := qualifiedName("VERIFIED_LABEL", c.VerifiedLabel); err != nil {
				return err
			}
			// The release records its time and duration in annotations named after the
			// label: a name part of 55 characters or more makes those keys invalid, and
			// the API server would refuse every release.
			for _, key := range wellknown.Annotations(c.VerifiedLabel) {
				if errs := validation.IsQualifiedName(key); len(errs) > 0 {
					return &Error{"VERIFIED_LABEL", c.VerifiedLabel, fmt.Sprintf("the annotation %s that records the release is not a valid key: %s (keep the name after the / at most 54 characters)",
						key, strings.Join(errs, "; "))}
				}
			}
			return nil
		},
		func() error { return labelValue("VERIFIED_LABEL_VALUE", c.VerifiedLabelValue) },
		func() error { return positive("INITIAL_TIMEOUT", c.InitialTimeout) },
		func() error {
			if c.MaxRetries < 1 {
				return &Error{"MAX_RETRIES", strconv.Itoa(c.MaxRetries), "must be at least 1"}
			}
			return nil
		},
		func() error { return oneOf("RETRY_BACKOFF", c.RetryBackoff, backoffs) },
		func() error { return positive("RETRY_BACKOFF_BASE", c.RetryBackoffBase) },
		func() error {
			if c.RetryBackoffMax < c.RetryBackoffBase {
				return &Error{"RETRY_BACKOFF_MAX", c.RetryBackoffMax.String(), "must not be shorter than RETRY_BACKOFF_BASE (" + c.RetryBackoffBase.String() + ")"}
			}
			return nil
		},
		func() error { return positive("CHECK_TIMEOUT", c.CheckTimeout) },
		func() error {
			if c.SettleTime < 0 || c.SettleTime > MaxSettleTime {
				return &Error{"SETTLE_TIME", c.SettleTime.String(), "must be from 0s (off) to " + MaxSettleTime.String() + ", below the pod's termination grace period"}
			}
			return nil
		},
		l.parseChecks,
		l.validateGates,
		func() error {
			if !c.selected(checks.NameDNS) {
				return nil
			}
			if len(c.DNSTestDomains) == 0 {
				return &Error{"DNS_TEST_DOMAINS", "", "required when CHECKS has dns: a comma-separated list of names"}
			}
			for _, d := range c.DNSTestDomains {
				// An IP address "resolves" to itself, as it did in kube-node-ready
				// (README: Coming from kube-node-ready); IPv6 too.
				if _, err := netip.ParseAddr(d); err == nil {
					continue
				}
				// DNS is case-insensitive and a trailing dot only marks the
				// name as absolute, so both are accepted.
				if err := dns1123("DNS_TEST_DOMAINS", strings.TrimSuffix(strings.ToLower(d), "."), false); err != nil {
					err.Value = d
					return err
				}
			}
			return nil
		},
		func() error {
			if c.DNSNameserver == "" {
				return nil
			}
			return hostPort("DNS_NAMESERVER", c.DNSNameserver)
		},
		func() error {
			for _, t := range l.tcpTargets {
				if err := hostPort("TCP_TARGETS", t); err != nil {
					return err
				}
			}
			c.TCPTargets = l.tcpTargets
			if len(c.TCPTargets) == 0 && l.serviceHost != "" {
				c.TCPTargets = []string{net.JoinHostPort(l.serviceHost, l.servicePort)}
			}
			if c.selected(checks.NameTCP) && len(c.TCPTargets) == 0 && !l.dryRun {
				return &Error{"TCP_TARGETS", "", "required when CHECKS has tcp and KUBERNETES_SERVICE_HOST is not set: a comma-separated list of host:port"}
			}
			return nil
		},
		func() error {
			if l.serviceHost == "" {
				return nil
			}
			return hostPort("KUBERNETES_SERVICE_PORT", net.JoinHostPort(l.serviceHost, l.servicePort))
		},
		func() error {
			if c.selected(checks.NameHTTP) && len(c.HTTPURLs) == 0 {
				return &Error{"HTTP_URLS", "", "required when CHECKS has http: a comma-separated list of http:// or https:// URLs"}
			}
			for _, raw := range c.HTTPURLs {
				u, err := url.Parse(raw)
				if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					return &Error{"HTTP_URLS", raw, "not a URL: use http://host[:port]/path or https://..."}
				}
			}
			return nil
		},
		func() (err error) {
			if c.HTTPExpectedStatus, err = checks.ParseStatusMatcher(l.httpStatus); err != nil {
				return &Error{"HTTP_EXPECTED_STATUS", l.httpStatus, "use status codes or classes, comma-separated, such as 2xx, 200 or 200,204"}
			}
			return nil
		},
		func() (err error) {
			// The CA file is read here, once: the http checks use this client.
			if c.HTTPClient, err = checks.NewHTTPClient(l.httpCAFile); err != nil {
				return &Error{"HTTP_CA_FILE", l.httpCAFile, fmt.Sprintf("must be a readable PEM file with at least one certificate (%v)", err)}
			}
			return nil
		},
		func() error { return oneOf("APISERVER_PROBE", c.APIServerProbe, checks.APIServerModes) },
		func() error {
			c.EndpointsService = serviceRef(l.endpoints, "default")
			if !validService(c.EndpointsService) {
				return &Error{"ENDPOINTS_SERVICE", l.endpoints, "use namespace/name of a Service, such as default/kubernetes"}
			}
			return nil
		},
		func() error {
			if l.clusterDNS == "" {
				return nil
			}
			c.ClusterDNSService = serviceRef(l.clusterDNS, "kube-system")
			if !validService(c.ClusterDNSService) {
				return &Error{"CLUSTER_DNS_SERVICE", l.clusterDNS, "use namespace/name of a Service, such as kube-system/kube-dns, or leave it empty"}
			}
			return nil
		},
		l.validatePodNetwork,
		func() error {
			if c.StateDir != "" && !filepath.IsAbs(c.StateDir) {
				return &Error{"STATE_DIR", c.StateDir, "must be an absolute path, such as /run/nodeready, or empty"}
			}
			return nil
		},
		l.validateFailureAction,
		l.validateExternalTaint,
		func() error { return oneOf("LOG_LEVEL", c.LogLevel, logLevels) },
		func() error { return oneOf("LOG_FORMAT", c.LogFormat, logFormats) },
	} {
		if err := v(); err != nil {
			return err
		}
	}
	return nil
}

// startupTaints parses the taints the agent holds the node with: TAINT_KEY's
// first, then EXTRA_TAINTS, each key and effect once.
func (l *loader) startupTaints() error {
	taints := []corev1.Taint{{Key: l.taintKey, Value: l.taintValue, Effect: corev1.TaintEffect(l.taintEffect)}}
	for _, s := range l.extraTaints {
		t, err := parseTaint(s)
		if err != nil {
			return &Error{"EXTRA_TAINTS", join(l.extraTaints), fmt.Sprintf("%q: %s", s, err)}
		}
		if slices.ContainsFunc(taints, func(o corev1.Taint) bool { return o.MatchTaint(&t) }) {
			return &Error{"EXTRA_TAINTS", join(l.extraTaints), fmt.Sprintf("%s:%s is named twice (TAINT_KEY and TAINT_EFFECT name the first taint)", t.Key, t.Effect)}
		}
		taints = append(taints, t)
	}
	l.c.StartupTaints = taints
	return nil
}

// parseTaint reads key[=value]:effect.
func parseTaint(s string) (corev1.Taint, error) {
	kv, effect, ok := strings.Cut(s, ":")
	if !ok {
		return corev1.Taint{}, errors.New("write key[=value]:effect, such as readiness.k8s.io/nodeready=true:NoSchedule")
	}
	key, value, _ := strings.Cut(kv, "=")
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return corev1.Taint{}, fmt.Errorf("not a valid taint key: %s", strings.Join(errs, "; "))
	}
	if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
		return corev1.Taint{}, fmt.Errorf("not a valid taint value: %s", strings.Join(errs, "; "))
	}
	if !slices.Contains(taintEffects, effect) {
		return corev1.Taint{}, fmt.Errorf("effect %q: use one of %s", effect, strings.Join(taintEffects, ", "))
	}
	return corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)}, nil
}

// parseChecks reads CHECKS: known names, each once.
func (l *loader) parseChecks() error {
	known := make([]string, len(KnownChecks))
	for i, n := range KnownChecks {
		known[i] = string(n)
	}
	if len(l.checks) == 0 {
		return &Error{"CHECKS", "", "name at least one check: " + strings.Join(known, ", ")}
	}
	for _, s := range l.checks {
		name := checks.Name(s)
		if !slices.Contains(KnownChecks, name) {
			return &Error{"CHECKS", join(l.checks), fmt.Sprintf("unknown check %q: use %s", s, strings.Join(known, ", "))}
		}
		if slices.Contains(l.c.Checks, name) {
			return &Error{"CHECKS", join(l.checks), fmt.Sprintf("check %q is named twice", s)}
		}
		l.c.Checks = append(l.c.Checks, name)
	}
	return nil
}

// validateFailureAction also resolves DELETE_FAILED_NODE (compat.go).
func (l *loader) validateFailureAction() error {
	c := &l.c
	if err := oneOf("FAILURE_ACTION", c.FailureAction, failures); err != nil {
		return err
	}
	if err := l.fromDeleteFailedNode(); err != nil {
		return err
	}
	if c.FailureAction == FailOpen {
		return positive("FAIL_OPEN_AFTER", c.FailOpenAfter)
	}
	return nil
}

// validateExternalTaint refuses the settings that write the startup taint
// when it is another controller's; it runs after validateFailureAction, which
// resolves DELETE_FAILED_NODE.
func (l *loader) validateExternalTaint() error {
	c := &l.c
	switch {
	case !c.ExternalTaint():
		return nil
	case len(l.extraTaints) > 0:
		return &Error{"EXTRA_TAINTS", join(l.extraTaints), "names taints nodeready removes, and with TAINT_OWNER=external it removes none: leave it empty"}
	case c.ReverifyTaint:
		return &Error{"REVERIFY_TAINT", "true", "puts the startup taint back, and with TAINT_OWNER=external that taint is another controller's: leave it false"}
	case c.FailureAction == FailOpen:
		return &Error{"FAILURE_ACTION", FailOpen, "releases a node with failing checks by removing the taint, and with TAINT_OWNER=external its owner removes it only when node-ready/Verified is True: use keep-tainted or replace-node"}
	}
	return nil
}

// serviceRef splits namespace/name; a bare name is in namespace.
func serviceRef(s, namespace string) types.NamespacedName {
	if ns, n, ok := strings.Cut(s, "/"); ok {
		return types.NamespacedName{Namespace: ns, Name: n}
	}
	return types.NamespacedName{Namespace: namespace, Name: s}
}

func validService(ref types.NamespacedName) bool {
	return len(validation.IsDNS1123Label(ref.Namespace)) == 0 && len(validation.IsDNS1123Label(ref.Name)) == 0
}

// join writes a list as it was read, for a message.
func join(l []string) string { return strings.Join(l, ",") }

func oneOf(name, value string, accepted []string) error {
	if slices.Contains(accepted, value) {
		return nil
	}
	return &Error{name, value, "use one of " + strings.Join(accepted, ", ")}
}

func positive(name string, d time.Duration) error {
	if d > 0 {
		return nil
	}
	return &Error{name, d.String(), "must be longer than 0, such as 10s"}
}

func qualifiedName(name, value string) error {
	if errs := validation.IsQualifiedName(value); len(errs) > 0 {
		return &Error{name, value, "not a valid label or taint key: " + strings.Join(errs, "; ")}
	}
	return nil
}

func labelValue(name, value string) error {
	if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
		return &Error{name, value, "not a valid label or taint value: " + strings.Join(errs, "; ")}
	}
	return nil
}

// dns1123 returns nil or an *Error, typed so that a caller can adjust it.
func dns1123(name, value string, allowEmpty bool) *Error {
	if value == "" && allowEmpty {
		return nil
	}
	if errs := validation.IsDNS1123Subdomain(value); len(errs) > 0 {
		return &Error{name, value, "not a valid DNS name: " + strings.Join(errs, "; ")}
	}
	return nil
}

func hostPort(name, value string) error {
	host, port, err := net.SplitHostPort(value)
	if err == nil && host != "" {
		if p, perr := strconv.Atoi(port); perr == nil && p >= 1 && p <= 65535 {
			return nil
		}
	}
	return &Error{name, value, "use host:port, such as 10.96.0.1:443 or [fd00::1]:443"}
}

// namespacedName checks a "namespace/name" of a namespaced object.
func namespacedName(name, value string) error {
	ns, n, ok := strings.Cut(value, "/")
	if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(n)) > 0 {
		return &Error{name, value, "use namespace/name, such as kube-system/cilium"}
	}
	return nil
}

// validatePodNetwork parses the podnetwork check's Service, port and probe: by
// default the cluster DNS Service's pods, each asked a DNS query.
func (l *loader) validatePodNetwork() error {
	c := &l.c
	if c.PodNetworkNodes < 1 {
		return &Error{"POD_NETWORK_NODES", strconv.Itoa(c.PodNetworkNodes), "must be at least 1"}
	}
	if p := l.podNetworkPort; p != "" {
		if n, err := strconv.Atoi(p); (err != nil || n < 1 || n > 65535) && len(validation.IsValidPortName(p)) > 0 {
			return &Error{"POD_NETWORK_PORT", p, "use a port number from 1 to 65535 or a port name of the Service, such as dns-tcp, or leave it empty"}
		}
	}
	if l.podNetworkPath != "" && !strings.HasPrefix(l.podNetworkPath, "/") {
		return &Error{"POD_NETWORK_HTTP_PATH", l.podNetworkPath, "must be a path starting with /, such as /healthz, or empty for a TCP connection"}
	}
	c.PodNetworkProbe = checks.PodProbe{Port: l.podNetworkPort, HTTPPath: l.podNetworkPath}
	if l.podNetworkService != "" {
		c.PodNetworkService = serviceRef(l.podNetworkService, "default")
		if !validService(c.PodNetworkService) {
			return &Error{"POD_NETWORK_SERVICE", l.podNetworkService, "use namespace/name of a Service, such as kube-system/kube-dns, or leave it empty for CLUSTER_DNS_SERVICE"}
		}
		return nil
	}
	if l.podNetworkPath != "" {
		return &Error{"POD_NETWORK_HTTP_PATH", l.podNetworkPath, "applies to the pods of POD_NETWORK_SERVICE; the cluster DNS pods are asked a DNS query: set POD_NETWORK_SERVICE too, or leave it empty"}
	}
	if c.ClusterDNSService.Name == "" && c.selected(checks.NamePodNetwork) {
		return &Error{"POD_NETWORK_SERVICE", "", "required when CHECKS has podnetwork and CLUSTER_DNS_SERVICE is empty: namespace/name of a Service with pods on other nodes"}
	}
	c.PodNetworkService = c.ClusterDNSService
	c.PodNetworkProbe.DNSName = podQueryName
	for _, d := range c.DNSTestDomains {
		if _, err := netip.ParseAddr(d); err != nil { // an IP address is no question to ask
			c.PodNetworkProbe.DNSName = d
			break
		}
	}
	return nil
}

// podQueryName is asked of the cluster DNS pods when DNS_TEST_DOMAINS has no name.
const podQueryName = "kubernetes.default.svc.cluster.local"
