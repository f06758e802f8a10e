// Package agent runs nodeready on one node: it loads the configuration, runs
// rounds of checks with backoff, releases the node through nodepatch, serves
// health and metrics, and waits for the SIGTERM that the DaemonSet
// controller's deletion of its pod brings.
package agent

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nodeready/nodeready/checks"
)

// Config is the whole configuration. It comes from environment variables
// only; the names follow the ConfigMap of the original kube-node-ready
// DaemonSet mode so that such a ConfigMap works unchanged through envFrom
// (compat.go). The README's configuration table is checked against these
// tags; loadEnv reads them.
type Config struct {
	NodeName     string `envconfig:"NODE_NAME" desc:"Name of the node to verify (downward API spec.nodeName); required unless --dry-run"`
	PodName      string `envconfig:"POD_NAME" desc:"Own pod name (downward API), for logs and Events"`
	PodNamespace string `envconfig:"POD_NAMESPACE" desc:"Own pod namespace (downward API), for logs and Events"`

	TaintKey           string `envconfig:"TAINT_KEY" default:"node-ready/unverified" desc:"Key of the startup taint to remove"`
	TaintValue         string `envconfig:"TAINT_VALUE" default:"true" desc:"Value of the startup taint (informational: every taint with the key and effect is removed)"`
	TaintEffect        string `envconfig:"TAINT_EFFECT" default:"NoSchedule" desc:"Effect of the startup taint: NoSchedule, PreferNoSchedule or NoExecute"`
	ExtraTaints        List   `envconfig:"EXTRA_TAINTS" desc:"More startup taints, removed in the same write as TAINT_KEY's and held on the same terms: key[=value]:effect, comma-separated (the kubelet's --register-with-taints form); for a node held under several names, such as a readiness.k8s.io/ taint and a startup-taint.cluster-autoscaler.kubernetes.io/ one"`
	TaintOwner         string `envconfig:"TAINT_OWNER" default:"nodeready" desc:"Who removes the startup taint: nodeready, in the release's write, or external: a controller such as node-readiness-controller (a NodeReadinessRule on node-ready/Verified) removes TAINT_KEY's taint when the condition turns True; nodeready writes the condition, then the label, and never a taint (TAINT_KEY still tells a node it holds)"`
	VerifiedLabel      string `envconfig:"VERIFIED_LABEL" default:"node-ready/verified" desc:"Label added to a verified node; the DaemonSet's node affinity must use the same key"`
	VerifiedLabelValue string `envconfig:"VERIFIED_LABEL_VALUE" default:"true" desc:"Value of the verified label"`

	InitialTimeout   time.Duration `envconfig:"INITIAL_TIMEOUT" default:"300s" desc:"Time from the agent's first start in its pod after which failing checks are recorded as a failed verification"`
	MaxRetries       int           `envconfig:"MAX_RETRIES" default:"5" desc:"Rounds of checks after which failing checks are recorded as a failed verification"`
	RetryBackoff     string        `envconfig:"RETRY_BACKOFF" default:"exponential" desc:"Delay between rounds: exponential, linear or constant"`
	RetryBackoffBase time.Duration `envconfig:"RETRY_BACKOFF_BASE" default:"1s" desc:"First delay between rounds (every delay with constant and linear); unset with linear, it is 5s, kube-node-ready's delay"`
	RetryBackoffMax  time.Duration `envconfig:"RETRY_BACKOFF_MAX" default:"30s" desc:"Longest delay between rounds; after a recorded failure, checks repeat at this interval"`
	CheckTimeout     time.Duration `envconfig:"CHECK_TIMEOUT" default:"10s" desc:"Time limit of one check in one round"`
	SettleTime       time.Duration `envconfig:"SETTLE_TIME" default:"2s" desc:"After the release, watch the own node this long and release it again if the startup taint comes back; 0 turns it off; keep it well below the pod's terminationGracePeriodSeconds"`

	Checks List `envconfig:"CHECKS" default:"dns,tcp,apiserver,endpoints" desc:"Checks to run, comma-separated: dns, tcp, http, apiserver, endpoints, and the gates daemonsets, conditions, resources, csi, dra, command"`

	DNSTestDomains List   `envconfig:"DNS_TEST_DOMAINS" default:"kubernetes.default.svc.cluster.local" desc:"dns: names that must resolve"`
	DNSNameserver  string `envconfig:"DNS_NAMESERVER" desc:"dns: host:port of the nameserver to ask; empty for the pod's resolv.conf"`
	ClusterDNS     string `envconfig:"CLUSTER_DNS_SERVICE" default:"kube-system/kube-dns" desc:"dns: namespace/name of the cluster DNS Service; while its EndpointSlices have no ready endpoint anywhere, a failing dns check is reported as not checkable instead of holding the node (no node could pass it, and DNS pods may need a released node to run on); empty turns this off"`

	TCPTargets            List   `envconfig:"TCP_TARGETS" desc:"tcp: host:port list to connect to; empty for the API server's service address KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT"`
	KubernetesServiceHost string `envconfig:"KUBERNETES_SERVICE_HOST" desc:"Set by the kubelet in every pod; the default tcp target"`
	KubernetesServicePort string `envconfig:"KUBERNETES_SERVICE_PORT" default:"443" desc:"Set by the kubelet in every pod; the default tcp target's port"`

	HTTPURLs           List   `envconfig:"HTTP_URLS" desc:"http: URLs to GET; required when CHECKS has http"`
	HTTPExpectedStatus string `envconfig:"HTTP_EXPECTED_STATUS" default:"2xx" desc:"http: accepted status codes, such as 2xx, 200 or 200,204"`
	HTTPCAFile         string `envconfig:"HTTP_CA_FILE" desc:"http: PEM file of CA certificates to trust instead of the system roots"`

	APIServerProbe string `envconfig:"APISERVER_PROBE" default:"readyz" desc:"apiserver: readyz (GET /readyz) or node (GET the own Node)"`

	EndpointsService string `envconfig:"ENDPOINTS_SERVICE" default:"default/kubernetes" desc:"endpoints: namespace/name of the Service whose EndpointSlices must have a ready endpoint"`
	EndpointsConnect bool   `envconfig:"ENDPOINTS_CONNECT" default:"true" desc:"endpoints: also connect to one ready endpoint directly, bypassing the Service"`

	DaemonSets         List   `envconfig:"DAEMONSETS" desc:"daemonsets: namespace/name of the DaemonSets that must have a Ready pod on the node; empty to discover every DaemonSet that runs on the node before and after the release"`
	DaemonSetsSelector string `envconfig:"DAEMONSETS_SELECTOR" desc:"daemonsets: label selector that limits discovery, such as tier=node; empty for every DaemonSet"`
	DaemonSetsExclude  List   `envconfig:"DAEMONSETS_EXCLUDE" desc:"daemonsets: namespace/name of DaemonSets that discovery leaves out"`

	NodeConditions List `envconfig:"NODE_CONDITIONS" default:"Ready=True" desc:"conditions: Type=Status pairs the node must report, such as Ready=True,NetworkUnavailable=False"`

	RequiredResources List `envconfig:"REQUIRED_RESOURCES" desc:"resources: minimums of the node's allocatable resources, such as nvidia.com/gpu>=1,example.com/fpga>=2; required when CHECKS has resources"`

	CSIDrivers            List `envconfig:"CSI_DRIVERS" desc:"csi: CSI drivers that must be registered in the node's CSINode, such as ebs.csi.aws.com; required when CHECKS has csi"`
	CSIRequireAllocatable bool `envconfig:"CSI_REQUIRE_ALLOCATABLE" default:"true" desc:"csi: also require the driver's allocatable volume count; false for drivers that report no volume limit"`

	DRADevices List `envconfig:"DRA_DEVICES" desc:"dra: DRA drivers and the least number of devices each must publish for the node in complete ResourceSlice pools, such as gpu.nvidia.com>=8 or gpu.nvidia.com[productName=NVIDIA A100-SXM4-80GB]>=8; required when CHECKS has dra"`

	CommandPath string `envconfig:"CHECK_COMMAND" desc:"command: absolute path of a program that passes by exiting 0, run without a shell; required when CHECKS has command"`
	CommandArgs List   `envconfig:"CHECK_COMMAND_ARGS" desc:"command: its arguments, comma-separated (an argument cannot contain a comma)"`

	StateDir string `envconfig:"STATE_DIR" desc:"Directory that outlives a container restart (an emptyDir of the pod): the agent records its first start there, so INITIAL_TIMEOUT, FAIL_OPEN_AFTER and MIN_HOLD_TIME count from the pod's first start, not the container's; empty counts from the process start"`

	MinHoldTime time.Duration `envconfig:"MIN_HOLD_TIME" default:"0s" desc:"Keep the node tainted at least this long after the agent first started in its pod, for caches that need time; checks that pass earlier run once more when it ends; 0s turns it off"`

	FailureAction    string        `envconfig:"FAILURE_ACTION" default:"keep-tainted" desc:"What a failed verification of a node nodeready holds (it had the startup taint when the agent started) does: keep-tainted (keep checking), fail-open (release after FAIL_OPEN_AFTER) or replace-node (delete the node's Karpenter NodeClaim, else the Node, never a control-plane node; needs manifests/replace-node/); a misconfiguration (a refused release or check) never brings it on"`
	FailOpenAfter    time.Duration `envconfig:"FAIL_OPEN_AFTER" default:"30m" desc:"fail-open: time from the agent's first start in its pod after which a node it holds with failing checks is released anyway"`
	DeleteFailedNode bool          `envconfig:"DELETE_FAILED_NODE" default:"false" desc:"kube-node-ready's name for FAILURE_ACTION=replace-node; true selects it"`
	ReverifyTaint    bool          `envconfig:"REVERIFY_TAINT" default:"false" desc:"Put the startup taint back when the agent starts on a node that nodeready verified before (its completion annotation is there) and that has neither the label nor the taint any more (re-verification after the label was removed), so no new workloads land while it is checked again; never on a node nodeready has not verified"`

	ReadOnly bool `envconfig:"DRY_RUN" default:"false" desc:"kube-node-ready's read-only switch: true runs the rounds of checks and logs each write the agent would make, but writes nothing (no label, taint, condition, Event or deletion)"`

	EnableMetrics bool   `envconfig:"ENABLE_METRICS" default:"true" empty:"false" desc:"Serve /metrics (the /healthz and /readyz probes are served either way)"`
	MetricsPort   Port   `envconfig:"METRICS_PORT" default:"8080" desc:"Port of /metrics, /healthz and /readyz"`
	LogLevel      string `envconfig:"LOG_LEVEL" default:"info" empty:"info" desc:"trace, debug, info, warn or error"`
	LogFormat     string `envconfig:"LOG_FORMAT" default:"json" empty:"json" desc:"json, or console for people"`
}

// Names of the checks, as CHECKS takes them.
const (
	CheckDNS       = "dns"
	CheckTCP       = "tcp"
	CheckHTTP      = "http"
	CheckAPIServer = "apiserver"
	CheckEndpoints = "endpoints"

	// The gates: see gates.go.
	CheckDaemonSets = "daemonsets"
	CheckConditions = "conditions"
	CheckResources  = "resources"
	CheckCSI        = "csi"
	CheckDRA        = "dra"
	CheckCommand    = "command"
)

// maxSettleTime keeps the settle window, which a SIGTERM does not cut short,
// inside the DaemonSet's 30 s termination grace period with room to spare.
const maxSettleTime = 15 * time.Second

// KnownChecks lists every check name CHECKS accepts.
var KnownChecks = []string{CheckDNS, CheckTCP, CheckHTTP, CheckAPIServer, CheckEndpoints,
	CheckDaemonSets, CheckConditions, CheckResources, CheckCSI, CheckDRA, CheckCommand}

var (
	taintEffects = []string{string(corev1.TaintEffectNoSchedule), string(corev1.TaintEffectPreferNoSchedule), string(corev1.TaintEffectNoExecute)}
	backoffs     = []string{"exponential", "linear", "constant"}
	logLevels    = []string{"trace", "debug", "info", "warn", "error"}
	logFormats   = []string{"json", "console"}
)

// ConfigError is a bad environment variable: which one, its value, and what
// is accepted. Its message is the one line the agent prints before exit 2.
type ConfigError struct {
	Var, Value, Accepted string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("invalid configuration: %s=%q: %s", e.Var, e.Value, e.Accepted)
}

// List is a comma-separated environment variable. Items are trimmed and
// empty items dropped, so "a, b," is [a b].
type List []string

// Decode implements envconfig.Decoder.
func (l *List) Decode(value string) error {
	*l = nil
	for item := range strings.SplitSeq(value, ",") {
		if item = strings.TrimSpace(item); item != "" {
			*l = append(*l, item)
		}
	}
	return nil
}

func (l List) String() string { return strings.Join(l, ",") }

// LoadConfig reads the configuration from the environment and validates it.
// In dry-run mode NODE_NAME may be empty.
func LoadConfig(dryRun bool) (Config, error) {
	var c Config
	if err := loadEnv(&c); err != nil {
		return c, err
	}
	if err := c.fromKubeNodeReady(os.LookupEnv); err != nil {
		return c, err
	}
	return c, c.Validate(dryRun)
}

func acceptedType(typeName string) string {
	switch typeName {
	case "time.Duration":
		return "not a duration: use a number with a unit, such as 10s, 5m or 1h30m"
	case "int":
		return "not a whole number"
	case "bool":
		return "use true or false"
	case "agent.Port":
		return portAccepted
	default:
		return "cannot be read as " + typeName
	}
}

// Validate checks every value and returns the first bad one as a *ConfigError.
func (c *Config) Validate(dryRun bool) error {
	for _, v := range c.validators(dryRun) {
		if err := v(); err != nil {
			return err
		}
	}
	return nil
}

// Selected reports whether CHECKS includes the check name.
func (c *Config) Selected(name string) bool { return slices.Contains(c.Checks, name) }

// TCPAddresses is TCP_TARGETS, or the API server's service address when
// TCP_TARGETS is empty: the IP, so the tcp check does not depend on DNS.
func (c *Config) TCPAddresses() []string {
	if len(c.TCPTargets) > 0 {
		return c.TCPTargets
	}
	if c.KubernetesServiceHost == "" {
		return nil
	}
	return []string{net.JoinHostPort(c.KubernetesServiceHost, c.KubernetesServicePort)}
}

// EndpointsRef splits ENDPOINTS_SERVICE; a bare name is in "default".
func (c *Config) EndpointsRef() (namespace, name string) {
	if ns, n, ok := strings.Cut(c.EndpointsService, "/"); ok {
		return ns, n
	}
	return "default", c.EndpointsService
}

// ClusterDNSRef splits CLUSTER_DNS_SERVICE; a bare name is in "kube-system".
func (c *Config) ClusterDNSRef() (namespace, name string) {
	if ns, n, ok := strings.Cut(c.ClusterDNS, "/"); ok {
		return ns, n
	}
	return "kube-system", c.ClusterDNS
}

func (c *Config) validators(dryRun bool) []func() error {
	return []func() error{
		func() error {
			if c.NodeName == "" && !dryRun {
				return &ConfigError{"NODE_NAME", "", "required: set it from the downward API (fieldRef spec.nodeName), or use --dry-run"}
			}
			return dns1123("NODE_NAME", c.NodeName, true)
		},
		func() error { return qualifiedName("TAINT_KEY", c.TaintKey) },
		func() error { return labelValue("TAINT_VALUE", c.TaintValue) },
		func() error { return oneOf("TAINT_EFFECT", c.TaintEffect, taintEffects) },
		func() error { _, err := c.StartupTaints(); return err },
		func() error { return oneOf("TAINT_OWNER", c.TaintOwner, taintOwners) },
		func() error {
			if err := qualifiedName("VERIFIED_LABEL", c.VerifiedLabel); err != nil {
				return err
			}
			// The release records its time and duration in annotations named after the
			// label: a name part of 55 characters or more makes those keys invalid, and
			// the API server would refuse every release.
			for _, suffix := range []string{"-at", "-duration"} {
				if errs := validation.IsQualifiedName(c.VerifiedLabel + suffix); len(errs) > 0 {
					return &ConfigError{"VERIFIED_LABEL", c.VerifiedLabel, fmt.Sprintf("the annotation %s%s that records the release is not a valid key: %s (keep the name after the / at most 54 characters)",
						c.VerifiedLabel, suffix, strings.Join(errs, "; "))}
				}
			}
			return nil
		},
		func() error { return labelValue("VERIFIED_LABEL_VALUE", c.VerifiedLabelValue) },
		func() error { return positive("INITIAL_TIMEOUT", c.InitialTimeout) },
		func() error {
			if c.MaxRetries < 1 {
				return &ConfigError{"MAX_RETRIES", strconv.Itoa(c.MaxRetries), "must be at least 1"}
			}
			return nil
		},
		func() error { return oneOf("RETRY_BACKOFF", c.RetryBackoff, backoffs) },
		func() error { return positive("RETRY_BACKOFF_BASE", c.RetryBackoffBase) },
		func() error {
			if c.RetryBackoffMax < c.RetryBackoffBase {
				return &ConfigError{"RETRY_BACKOFF_MAX", c.RetryBackoffMax.String(), "must not be shorter than RETRY_BACKOFF_BASE (" + c.RetryBackoffBase.String() + ")"}
			}
			return nil
		},
		func() error { return positive("CHECK_TIMEOUT", c.CheckTimeout) },
		func() error {
			if c.SettleTime < 0 || c.SettleTime > maxSettleTime {
				return &ConfigError{"SETTLE_TIME", c.SettleTime.String(), "must be from 0s (off) to " + maxSettleTime.String() + ", below the pod's termination grace period"}
			}
			return nil
		},
		c.validateChecks,
		c.validateGates,
		func() error {
			if !c.Selected(CheckDNS) {
				return nil
			}
			if len(c.DNSTestDomains) == 0 {
				return &ConfigError{"DNS_TEST_DOMAINS", "", "required when CHECKS has dns: a comma-separated list of names"}
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
					err.(*ConfigError).Value = d
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
			for _, t := range c.TCPTargets {
				if err := hostPort("TCP_TARGETS", t); err != nil {
					return err
				}
			}
			if c.Selected(CheckTCP) && len(c.TCPAddresses()) == 0 && !dryRun {
				return &ConfigError{"TCP_TARGETS", "", "required when CHECKS has tcp and KUBERNETES_SERVICE_HOST is not set: a comma-separated list of host:port"}
			}
			return nil
		},
		func() error {
			if c.KubernetesServiceHost == "" {
				return nil
			}
			return hostPort("KUBERNETES_SERVICE_PORT", net.JoinHostPort(c.KubernetesServiceHost, c.KubernetesServicePort))
		},
		func() error {
			if c.Selected(CheckHTTP) && len(c.HTTPURLs) == 0 {
				return &ConfigError{"HTTP_URLS", "", "required when CHECKS has http: a comma-separated list of http:// or https:// URLs"}
			}
			for _, raw := range c.HTTPURLs {
				u, err := url.Parse(raw)
				if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					return &ConfigError{"HTTP_URLS", raw, "not a URL: use http://host[:port]/path or https://..."}
				}
			}
			return nil
		},
		func() error {
			if _, err := checks.ParseStatusMatcher(c.HTTPExpectedStatus); err != nil {
				return &ConfigError{"HTTP_EXPECTED_STATUS", c.HTTPExpectedStatus, "use status codes or classes, comma-separated, such as 2xx, 200 or 200,204"}
			}
			return nil
		},
		func() error {
			if c.HTTPCAFile == "" {
				return nil
			}
			if _, err := checks.NewHTTPClient(c.HTTPCAFile); err != nil {
				return &ConfigError{"HTTP_CA_FILE", c.HTTPCAFile, fmt.Sprintf("must be a readable PEM file with at least one certificate (%v)", err)}
			}
			return nil
		},
		func() error { return oneOf("APISERVER_PROBE", c.APIServerProbe, checks.APIServerModes) },
		func() error {
			ns, name := c.EndpointsRef()
			if len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Label(name)) > 0 {
				return &ConfigError{"ENDPOINTS_SERVICE", c.EndpointsService, "use namespace/name of a Service, such as default/kubernetes"}
			}
			return nil
		},
		func() error {
			if c.ClusterDNS == "" {
				return nil
			}
			ns, name := c.ClusterDNSRef()
			if len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Label(name)) > 0 {
				return &ConfigError{"CLUSTER_DNS_SERVICE", c.ClusterDNS, "use namespace/name of a Service, such as kube-system/kube-dns, or leave it empty"}
			}
			return nil
		},
		func() error {
			if c.StateDir != "" && !filepath.IsAbs(c.StateDir) {
				return &ConfigError{"STATE_DIR", c.StateDir, "must be an absolute path, such as /run/nodeready, or empty"}
			}
			return nil
		},
		func() error {
			if c.MetricsPort < 1 || c.MetricsPort > 65535 {
				return &ConfigError{"METRICS_PORT", strconv.Itoa(int(c.MetricsPort)), portAccepted}
			}
			return nil
		},
		c.validateFailureAction,
		c.validateExternalTaint,
		func() error { return oneOf("LOG_LEVEL", c.LogLevel, logLevels) },
		func() error { return oneOf("LOG_FORMAT", c.LogFormat, logFormats) },
	}
}

// Failure actions, as FAILURE_ACTION takes them.
const (
	KeepTainted = "keep-tainted"
	FailOpen    = "fail-open"
	ReplaceNode = "replace-node"
)

var failureActions = []string{KeepTainted, FailOpen, ReplaceNode}

// validateFailureAction also resolves DELETE_FAILED_NODE, the original
// kube-node-ready switch, into FAILURE_ACTION=replace-node.
func (c *Config) validateFailureAction() error {
	if err := oneOf("FAILURE_ACTION", c.FailureAction, failureActions); err != nil {
		return err
	}
	if c.DeleteFailedNode {
		if c.FailureAction == FailOpen {
			return &ConfigError{"DELETE_FAILED_NODE", "true", "contradicts FAILURE_ACTION=fail-open: set one of them"}
		}
		c.FailureAction = ReplaceNode
	}
	if c.FailureAction == FailOpen {
		return positive("FAIL_OPEN_AFTER", c.FailOpenAfter)
	}
	return nil
}

// Owners of the startup taint, as TAINT_OWNER takes them.
const (
	TaintOwnerNodeready = "nodeready"
	TaintOwnerExternal  = "external"
)

var taintOwners = []string{TaintOwnerNodeready, TaintOwnerExternal}

// ExternalTaint reports whether another controller removes the startup taint
// (TAINT_OWNER=external): nodeready's condition is then what releases the node.
func (c *Config) ExternalTaint() bool { return c.TaintOwner == TaintOwnerExternal }

// validateExternalTaint refuses the settings that write the startup taint
// when it is another controller's; it runs after validateFailureAction, which
// resolves DELETE_FAILED_NODE.
func (c *Config) validateExternalTaint() error {
	switch {
	case !c.ExternalTaint():
		return nil
	case len(c.ExtraTaints) > 0:
		return &ConfigError{"EXTRA_TAINTS", c.ExtraTaints.String(), "names taints nodeready removes, and with TAINT_OWNER=external it removes none: leave it empty"}
	case c.ReverifyTaint:
		return &ConfigError{"REVERIFY_TAINT", "true", "puts the startup taint back, and with TAINT_OWNER=external that taint is another controller's: leave it false"}
	case c.FailureAction == FailOpen:
		return &ConfigError{"FAILURE_ACTION", FailOpen, "releases a node with failing checks by removing the taint, and with TAINT_OWNER=external its owner removes it only when node-ready/Verified is True: use keep-tainted or replace-node"}
	}
	return nil
}

func (c *Config) validateChecks() error {
	if len(c.Checks) == 0 {
		return &ConfigError{"CHECKS", "", "name at least one check: " + strings.Join(KnownChecks, ", ")}
	}
	seen := map[string]bool{}
	for _, name := range c.Checks {
		if !slices.Contains(KnownChecks, name) {
			return &ConfigError{"CHECKS", c.Checks.String(), fmt.Sprintf("unknown check %q: use %s", name, strings.Join(KnownChecks, ", "))}
		}
		if seen[name] {
			return &ConfigError{"CHECKS", c.Checks.String(), fmt.Sprintf("check %q is named twice", name)}
		}
		seen[name] = true
	}
	return nil
}

func oneOf(name, value string, accepted []string) error {
	if slices.Contains(accepted, value) {
		return nil
	}
	return &ConfigError{name, value, "use one of " + strings.Join(accepted, ", ")}
}

func positive(name string, d time.Duration) error {
	if d > 0 {
		return nil
	}
	return &ConfigError{name, d.String(), "must be longer than 0, such as 10s"}
}

func qualifiedName(name, value string) error {
	if errs := validation.IsQualifiedName(value); len(errs) > 0 {
		return &ConfigError{name, value, "not a valid label or taint key: " + strings.Join(errs, "; ")}
	}
	return nil
}

func labelValue(name, value string) error {
	if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
		return &ConfigError{name, value, "not a valid label or taint value: " + strings.Join(errs, "; ")}
	}
	return nil
}

func dns1123(name, value string, allowEmpty bool) error {
	if value == "" && allowEmpty {
		return nil
	}
	if errs := validation.IsDNS1123Subdomain(value); len(errs) > 0 {
		return &ConfigError{name, value, "not a valid DNS name: " + strings.Join(errs, "; ")}
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
	return &ConfigError{name, value, "use host:port, such as 10.96.0.1:443 or [fd00::1]:443"}
}

// Port is a TCP port as METRICS_PORT gives it. envconfig would read an int with Go's base
// prefixes (010 as 8, 0x1F90 as 8080) where `nodeready probe` and people read decimal, so
// the agent listening on one port and its liveness probe dialling another; both read it
// with ParsePort instead.
type Port int

// Decode implements envconfig.Decoder.
func (p *Port) Decode(v string) error {
	n, err := ParsePort(v)
	*p = Port(n)
	return err
}

const portAccepted = "must be a port from 1 to 65535, in decimal without leading zeros"

// ParsePort reads a port in decimal, 1 to 65535, written as strconv.Itoa writes it: "010",
// "+80" and "0x1F90" are refused rather than read one way here and another elsewhere.
func ParsePort(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != v {
		return 0, errors.New(portAccepted)
	}
	return n, nil
}

// StartupTaints returns the taints the agent holds the node with and removes:
// TAINT_KEY's first, then EXTRA_TAINTS, each key and effect once.
func (c *Config) StartupTaints() ([]corev1.Taint, error) {
	taints := []corev1.Taint{{Key: c.TaintKey, Value: c.TaintValue, Effect: corev1.TaintEffect(c.TaintEffect)}}
	for _, s := range c.ExtraTaints {
		t, err := parseTaint(s)
		if err != nil {
			return nil, &ConfigError{"EXTRA_TAINTS", c.ExtraTaints.String(), fmt.Sprintf("%q: %s", s, err)}
		}
		if slices.ContainsFunc(taints, func(o corev1.Taint) bool { return o.MatchTaint(&t) }) {
			return nil, &ConfigError{"EXTRA_TAINTS", c.ExtraTaints.String(), fmt.Sprintf("%s:%s is named twice (TAINT_KEY and TAINT_EFFECT name the first taint)", t.Key, t.Effect)}
		}
		taints = append(taints, t)
	}
	return taints, nil
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
