// Package config is nodeready's configuration: every environment variable the
// agent reads, defined once as a field with its name, default and meaning in
// tags (read through envvar, that is envconfig), validated, and parsed into
// the values the agent builds its checks and its writes from. The agent's own
// variables are the fields of Config; each kind of check's are in its
// options, next to the check (package checks), read through the checks'
// catalog. The names follow the ConfigMap of the original kube-node-ready
// DaemonSet mode so that such a ConfigMap works unchanged through envFrom
// (compat.go).
package config

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeready/nodeready/checks"
	"github.com/nodeready/nodeready/internal/envvar"
)

// Config is the whole configuration, as Load returns it: every value checked
// and parsed. The README's configuration table and `nodeready --help` list
// the variables (Variables).
type Config struct {
	NodeName     string `envconfig:"NODE_NAME" desc:"Name of the node to verify (downward API spec.nodeName); required unless --dry-run"`
	PodName      string `envconfig:"POD_NAME" desc:"Own pod name (downward API), for logs and Events"`
	PodNamespace string `envconfig:"POD_NAMESPACE" desc:"Own pod namespace (downward API), for logs and Events"`

	TaintKey    string      `envconfig:"TAINT_KEY" default:"node-ready/unverified" desc:"Key of the startup taint to remove"`
	TaintValue  string      `envconfig:"TAINT_VALUE" default:"true" desc:"Value of the startup taint (informational: every taint with the key and effect is removed)"`
	TaintEffect string      `envconfig:"TAINT_EFFECT" default:"NoSchedule" desc:"Effect of the startup taint: NoSchedule, PreferNoSchedule or NoExecute"`
	ExtraTaints envvar.List `envconfig:"EXTRA_TAINTS" desc:"More startup taints, removed in the same write as TAINT_KEY's and held on the same terms: key[=value]:effect, comma-separated (the kubelet's --register-with-taints form); for a node held under several names, such as a readiness.k8s.io/ taint and a startup-taint.cluster-autoscaler.kubernetes.io/ one"`
	TaintOwner  string      `envconfig:"TAINT_OWNER" default:"nodeready" desc:"Who removes the startup taint: nodeready, in the release's write, or external: a controller such as node-readiness-controller (a NodeReadinessRule on node-ready/Verified) removes TAINT_KEY's taint when the condition turns True; nodeready writes the condition, then the label, and never a taint (TAINT_KEY still tells a node it holds)"`

	VerifiedLabel      string `envconfig:"VERIFIED_LABEL" default:"node-ready/verified" desc:"Label added to a verified node; the DaemonSet's node affinity must use the same key"`
	VerifiedLabelValue string `envconfig:"VERIFIED_LABEL_VALUE" default:"true" desc:"Value of the verified label"`

	InitialTimeout   time.Duration `envconfig:"INITIAL_TIMEOUT" default:"300s" desc:"Deprecated: MAX_RETRIES decides. Time from the agent's first start in its pod after which failing checks are recorded as a failed verification when MAX_RETRIES rounds have not come first (with the defaults they come within about 67s); another value than 300s is warned about at start"`
	MaxRetries       int           `envconfig:"MAX_RETRIES" default:"5" desc:"Rounds of checks after which failing checks are recorded as a failed verification"`
	RetryBackoff     string        `envconfig:"RETRY_BACKOFF" default:"exponential" desc:"Delay between rounds: exponential, linear or constant"`
	RetryBackoffBase time.Duration `envconfig:"RETRY_BACKOFF_BASE" default:"1s" desc:"First delay between rounds (every delay with constant and linear); unset with linear, it is 5s, kube-node-ready's delay"`
	RetryBackoffMax  time.Duration `envconfig:"RETRY_BACKOFF_MAX" default:"30s" desc:"Longest delay between rounds; after a recorded failure, checks repeat at this interval"`
	CheckTimeout     time.Duration `envconfig:"CHECK_TIMEOUT" default:"10s" desc:"Time limit of one check in one round"`
	SettleTime       time.Duration "envconfig:\"SETTLE_TIME\" default:\"2s\" desc:\"After the release, watch the own node this long and release it again if the startup taint comes back or the label goes (so a `kubectl label node NODE node-ready/verified-` in that window is undone: re-verify once the agent pod is gone); 0 turns it off; keep it well below the pod's terminationGracePeriodSeconds\""

	// FinalScrapeTimeout is in Config, not Serving: `nodeready probe` does not wait for scrapes.
	FinalScrapeTimeout time.Duration `envconfig:"METRICS_FINAL_SCRAPE_TIMEOUT" default:"0s" desc:"After the release, once the SIGTERM has come, keep serving /metrics until one scrape has read the agent's final numbers (the node's hold time, nodeready_verified 1), at most this long; set it where Prometheus scrapes the agents (the chart does with podMonitor.enabled), so that no node's hold time is lost to the scrape interval; 0s ends the agent after its settle window; at most 24s, inside the pod's terminationGracePeriodSeconds; no effect with ENABLE_METRICS=false"`

	CheckNames envvar.List `envconfig:"CHECKS" default:"dns,tcp,apiserver,clock,endpoints" desc:"Checks to run, comma-separated:"`

	StateDir    string        `envconfig:"STATE_DIR" desc:"Directory that outlives a container restart (an emptyDir of the pod): the agent records its first start there, so INITIAL_TIMEOUT, FAIL_OPEN_AFTER and MIN_HOLD_TIME count from the pod's first start, not the container's, and its rounds, so MAX_RETRIES counts on; empty counts from the process start"`
	MinHoldTime time.Duration `envconfig:"MIN_HOLD_TIME" default:"0s" desc:"Keep the node tainted at least this long after the agent first started in its pod, for caches that need time; checks that pass earlier run once more when it ends; 0s turns it off"`

	FailureAction         string        `envconfig:"FAILURE_ACTION" default:"keep-tainted" desc:"What a failed verification of a node nodeready holds (it had the startup taint when the agent started) does: keep-tainted (keep checking), fail-open (release after FAIL_OPEN_AFTER) or replace-node (delete the node's Karpenter NodeClaim, else the Node, never a control-plane node; needs manifests/replace-node/); a misconfiguration (a refused release or check) never brings it on"`
	FailOpenAfter         time.Duration `envconfig:"FAIL_OPEN_AFTER" default:"30m" desc:"fail-open: time from the agent's first start in its pod after which a node it holds with failing checks is released anyway"`
	FleetWindow           time.Duration `envconfig:"FLEET_WINDOW" default:"10m" desc:"fail-open and replace-node act only on evidence from the fleet that the fault is the node's own: another node of the same configuration passed within this long before the action, and fewer than SHARED_FAULT_PERCENTAGE of those nodes fail the same way; between 1m and 24h"`
	SharedFaultPercentage int           `envconfig:"SHARED_FAULT_PERCENTAGE" default:"55" desc:"A failing check counts as the fleet's fault, and withholds the failure action, once at least 3 nodes of the same configuration fail it and they are at least this share (1 to 100) of those that failed it or passed within FLEET_WINDOW; 55 is kube-controller-manager's --unhealthy-zone-threshold, past which it stops evicting from a zone"`
	DeleteFailedNode      bool          `envconfig:"DELETE_FAILED_NODE" default:"false" desc:"kube-node-ready's name for FAILURE_ACTION=replace-node; true selects it"`
	ReverifyTaint         bool          `envconfig:"REVERIFY_TAINT" default:"false" desc:"Put the startup taint back when the agent starts on a node that nodeready verified before (its completion annotation is there) and that has neither the label nor the taint any more (re-verification after the label was removed), so no new workloads land while it is checked again; never on a node nodeready has not verified"`

	ReadOnly bool `envconfig:"DRY_RUN" default:"false" desc:"kube-node-ready's read-only switch: true runs the rounds of checks and logs each write the agent would make, but writes nothing (no label, taint, condition, Event or deletion)"`

	// Serving is read on its own by `nodeready probe`.
	Serving
	LogLevel  string `envconfig:"LOG_LEVEL" default:"info" blank:"default" desc:"trace, debug, info, warn or error"`
	LogFormat string `envconfig:"LOG_FORMAT" default:"json" blank:"default" desc:"json, or console for people"`

	// StartupTaints are the taints the agent holds the node with and removes:
	// TAINT_KEY, TAINT_VALUE and TAINT_EFFECT's first, then EXTRA_TAINTS, each
	// key and effect once.
	StartupTaints []corev1.Taint `ignored:"true"`
	// Checks are the checks to run, in the order of CHECKS, each once.
	Checks []checks.Name `ignored:"true"`
	// Options are the options of every kind of check, each read from its
	// variables through the catalog, whether or not CHECKS names it.
	Options checks.Options `ignored:"true"`
}

// Serving is where the agent serves its metrics and probes.
type Serving struct {
	EnableMetrics bool        `envconfig:"ENABLE_METRICS" default:"true" blank:"false" desc:"Serve /metrics (the /healthz and /readyz probes are served either way)"`
	MetricsPort   envvar.Port `envconfig:"METRICS_PORT" default:"8080" desc:"Port of /metrics, /healthz and /readyz"`
}

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

// MaxFinalScrapeTimeout bounds METRICS_FINAL_SCRAPE_TIMEOUT, counted from the
// SIGTERM: what follows it (the Events' last flush, the metrics server's
// shutdown, the exit) fits in the rest of the 30 s termination grace period
// (report.FinalScrapeBudget holds them together).
const MaxFinalScrapeTimeout = 24 * time.Second

// ExternalTaint reports whether another controller removes the startup taint
// (TAINT_OWNER=external): nodeready's condition is then what releases the node.
func (c *Config) ExternalTaint() bool { return c.TaintOwner == TaintOwnerExternal }

// Error is a bad environment variable: which one, its value, and what is
// accepted.
type Error = envvar.Error

// Errors is every bad environment variable, as Load returns them.
type Errors = envvar.Errors

// refuse returns the *Error that refuses value of the variable name, with
// what it accepts.
func refuse(name, value, accepted string) error {
	return &Error{Var: name, Value: value, Accepted: accepted}
}
