// Package config is nodeready's configuration: every environment variable the
// agent reads (variables.go), read once through a lookup function, validated,
// and parsed into the values the agent builds its checks and its writes from.
// The names follow the ConfigMap of the original kube-node-ready DaemonSet
// mode so that such a ConfigMap works unchanged through envFrom (compat.go).
package config

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeready/nodeready/checks"
)

// Config is the whole configuration, as Load returns it: every value checked
// and parsed. The README's configuration table and `nodeready --help` list
// the variables (Variables); the comments here name the variable of each
// field where its name does not say it.
type Config struct {
	NodeName, PodName, PodNamespace string

	// StartupTaints are the taints the agent holds the node with and removes:
	// TAINT_KEY, TAINT_VALUE and TAINT_EFFECT's first, then EXTRA_TAINTS, each
	// key and effect once.
	StartupTaints      []corev1.Taint
	TaintOwner         string // TaintOwnerNodeready or TaintOwnerExternal
	VerifiedLabel      string
	VerifiedLabelValue string

	InitialTimeout   time.Duration
	MaxRetries       int
	RetryBackoff     string // exponential, linear or constant
	RetryBackoffBase time.Duration
	RetryBackoffMax  time.Duration
	CheckTimeout     time.Duration
	SettleTime       time.Duration

	// Checks are the checks to run, in the order of CHECKS, each once.
	Checks []checks.Name

	DNSTestDomains []string
	DNSNameserver  string
	// ClusterDNSService is CLUSTER_DNS_SERVICE; an empty Name turns its rule off.
	ClusterDNSService types.NamespacedName

	// TCPTargets is TCP_TARGETS, or the API server's service address
	// KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT when it is empty (the IP,
	// so the tcp check does not depend on DNS); empty when neither is set.
	TCPTargets []string

	HTTPURLs           []string
	HTTPExpectedStatus checks.StatusMatcher
	// HTTPClient is the client of the http checks: it trusts the certificates
	// of HTTP_CA_FILE, read once by Load, or the system roots.
	HTTPClient *http.Client

	APIServerProbe string // one of checks.APIServerModes

	EndpointsService types.NamespacedName
	EndpointsConnect bool

	// PodNetworkService is the Service whose pods on other nodes the podnetwork
	// check reaches: POD_NETWORK_SERVICE, or CLUSTER_DNS_SERVICE when that is
	// empty, whose pods are then asked a DNS query (PodNetworkProbe.DNSName).
	PodNetworkService types.NamespacedName
	PodNetworkProbe   checks.PodProbe
	PodNetworkNodes   int

	DaemonSets         []string // namespace/name
	DaemonSetsSelector labels.Selector
	DaemonSetsExclude  []string // namespace/name

	NodeConditions    []checks.ConditionWant
	RequiredResources []checks.ResourceMinimum

	CSIDrivers            []string
	CSIRequireAllocatable bool

	DRADevices []checks.DeviceMinimum

	CommandPath string   // CHECK_COMMAND
	CommandArgs []string // CHECK_COMMAND_ARGS

	StateDir    string
	MinHoldTime time.Duration

	// FailureAction is KeepTainted, FailOpen or ReplaceNode; DELETE_FAILED_NODE=true
	// is read as ReplaceNode.
	FailureAction string
	FailOpenAfter time.Duration
	ReverifyTaint bool

	ReadOnly bool // DRY_RUN

	EnableMetrics bool
	MetricsPort   int
	LogLevel      string // trace, debug, info, warn or error
	LogFormat     string // json or console
}

// KnownChecks lists every check name CHECKS accepts.
var KnownChecks = []checks.Name{checks.NameDNS, checks.NameTCP, checks.NameHTTP, checks.NameAPIServer, checks.NameEndpoints, checks.NamePodNetwork,
	checks.NameDaemonSets, checks.NameConditions, checks.NameResources, checks.NameCSI, checks.NameDRA, checks.NameCommand}

// Failure actions, as FAILURE_ACTION takes them.
const (
	KeepTainted = "keep-tainted"
	FailOpen    = "fail-open"
	ReplaceNode = "replace-node"
)

// Owners of the startup taint, as TAINT_OWNER takes them.
const (
	TaintOwnerNodeready = "nodeready"
	TaintOwnerExternal  = "external"
)

// MaxSettleTime keeps the settle window, which a SIGTERM does not cut short,
// inside the DaemonSet's 30 s termination grace period with room to spare.
const MaxSettleTime = 15 * time.Second

// ExternalTaint reports whether another controller removes the startup taint
// (TAINT_OWNER=external): nodeready's condition is then what releases the node.
func (c *Config) ExternalTaint() bool { return c.TaintOwner == TaintOwnerExternal }

// selected reports whether CHECKS includes the check.
func (c *Config) selected(name checks.Name) bool { return slices.Contains(c.Checks, name) }

// Error is a bad environment variable: which one, its value, and what is
// accepted. Its message is the one line the agent prints before exit 2.
type Error struct {
	Var, Value, Accepted string
}

func (e *Error) Error() string {
	return fmt.Sprintf("invalid configuration: %s=%q: %s", e.Var, e.Value, e.Accepted)
}
