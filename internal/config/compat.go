package config

import (
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nodeready/nodeready/checks"
	"github.com/nodeready/nodeready/internal/envvar"
)

// Handling says what nodeready does with a variable of kube-node-ready.
type Handling string

const (
	// Same: read with kube-node-ready's meaning.
	Same Handling = "same"
	// Translated: kube-node-ready's meaning, carried out in nodeready's terms.
	Translated Handling = "translated"
	// Refused: nodeready has no use for it. A value that had no effect in
	// kube-node-ready is accepted; any other stops the agent (exit 2) with
	// what to write instead.
	Refused Handling = "refused"
)

// KubeNodeReadyVariable is an environment variable that kube-node-ready's
// DaemonSet mode read, and what nodeready does with it.
type KubeNodeReadyVariable struct {
	Name     string
	Handling Handling
	Note     string // as the README's table shows it
}

// KubeNodeReadyVariables lists every environment variable that
// kube-node-ready's DaemonSet mode read (cmd/kube-node-ready/main.go, its
// urfave/cli flags, before commit 94fc291 removed that mode), in its order,
// then those its configuration reference sets without the code reading them.
// The README's "Coming from kube-node-ready" table is checked against it.
var KubeNodeReadyVariables = []KubeNodeReadyVariable{
	{"NODE_NAME", Same, "Required. kube-node-ready's dry run made it optional; here only `--dry-run` does."},
	{"POD_NAMESPACE", Same, "Informational: names the pod in logs and Events."},
	{"INITIAL_TIMEOUT", Same, "When it runs out with checks failing, kube-node-ready exited to be restarted; nodeready records the failure and keeps checking (`FAILURE_ACTION`). Empty means `300s`. Deprecated: `MAX_RETRIES` rounds come first with the defaults; another value is honoured and warned about."},
	{"CHECK_TIMEOUT", Same, "Per check. Unset or empty means `10s` (kube-node-ready's flag defaulted to `3s`; its chart always set it)."},
	{"MAX_RETRIES", Same, "Rounds before the failure is recorded. Empty means `5`."},
	{"RETRY_BACKOFF", Same, "`exponential`: 1s, 2s, 4s, ... up to 30s; `linear`: 5s every round. Both with 10% jitter."},
	{"DNS_TEST_DOMAINS", Same, "Comma-separated; an IP address, IPv4 or IPv6, passes as it did. Unset or empty means `kubernetes.default.svc.cluster.local` only (kube-node-ready added `google.com`; its chart set both)."},
	{"CLUSTER_DNS_IP", Refused, "kube-node-ready read it but never used it: its dns check asked the pod's resolv.conf, as nodeready does. Empty is accepted; an address stops the agent: remove it, or write `DNS_NAMESERVER=ADDRESS:53` to ask that server."},
	{"KUBERNETES_SERVICE_HOST", Same, "The address of the tcp check and of the in-cluster client."},
	{"KUBERNETES_SERVICE_PORT", Same, "Its port."},
	{"TAINT_KEY", Same, "kube-node-ready removed the first taint with this key; nodeready removes every taint with this key and `TAINT_EFFECT`."},
	{"TAINT_VALUE", Same, "Informational in both."},
	{"TAINT_EFFECT", Same, "`NoSchedule`, `PreferNoSchedule` or `NoExecute`; anything else stops the agent."},
	{"VERIFIED_LABEL", Same, "The label added on success."},
	{"VERIFIED_LABEL_VALUE", Same, "Its value."},
	{"ENABLE_METRICS", Same, "`false` turns `/metrics` off; the probes stay. Empty means `false`, as kube-node-ready read an empty boolean."},
	{"METRICS_PORT", Same, "Port of `/metrics`, `/healthz` and `/readyz`. Empty means `8080`."},
	{"LOG_LEVEL", Translated, "kube-node-ready logged through klog and ignored it. `trace`, `debug`, `info`, `warn` (or `warning`), `error`, in any case; empty means `info`; anything else stops the agent."},
	{"LOG_FORMAT", Translated, "kube-node-ready ignored it and wrote klog's text. `json`, or `console` (or `text`) for people, in any case; empty means `json`; anything else stops the agent."},
	{"KLOG_VERBOSITY", Refused, "nodeready's log level is `LOG_LEVEL`, client-go's klog lines included. Empty or `0` is accepted; a higher value stops the agent: remove it, and write `LOG_LEVEL=debug` for more detail."},
	{"DRY_RUN", Translated, "`true` runs the agent read-only: rounds of checks as usual, and a log line for each write it would make, but no label, taint, condition, Event or deletion. Empty means `false`."},
	{"KUBECONFIG", Same, "A kubeconfig file instead of the in-cluster configuration."},
	{"DELETE_FAILED_NODE", Translated, "`true` selects `FAILURE_ACTION=replace-node`, which needs `manifests/replace-node/`. Empty means `false`."},
	{"ENABLE_CONNECTIVITY_MATRIX", Translated, "Its configuration reference sets it for production (\"test pod-to-pod\"); kube-node-ready never read it. `true` adds the `podnetwork` check to `CHECKS`; `false` or empty leaves `CHECKS` as it is; anything else stops the agent."},
}

// linearDelay is the delay kube-node-ready's checker waited between
// attempts with RETRY_BACKOFF=linear (internal/checker/checker.go).
const linearDelay = 5 * time.Second

// fromKubeNodeReady carries out what KubeNodeReadyVariables promises beyond
// reading the variables: the log spellings, linear's delay, and the refusal
// of the variables nodeready has no use for, every one it refuses as Errors.
// It runs before validate.
func (c *Config) fromKubeNodeReady() error {
	var bad Errors
	c.LogLevel = strings.ToLower(c.LogLevel)
	if c.LogLevel == "warning" {
		c.LogLevel = "warn"
	}
	c.LogFormat = strings.ToLower(c.LogFormat)
	if c.LogFormat == "text" {
		c.LogFormat = "console"
	}
	if os.Getenv("RETRY_BACKOFF_BASE") == "" && c.RetryBackoff == "linear" {
		c.RetryBackoffBase = linearDelay
	}
	if v := os.Getenv("ENABLE_CONNECTIVITY_MATRIX"); v != "" {
		on, err := strconv.ParseBool(v)
		if err != nil {
			bad.Collect(refuse("ENABLE_CONNECTIVITY_MATRIX", v, "use true (adds the podnetwork check to CHECKS) or false"))
		}
		if on && !slices.Contains(c.CheckNames, string(checks.NamePodNetwork)) {
			c.CheckNames = append(c.CheckNames, string(checks.NamePodNetwork))
		}
	}
	if ip := os.Getenv("CLUSTER_DNS_IP"); ip != "" {
		bad.Collect(refuse("CLUSTER_DNS_IP", ip, "kube-node-ready read it but never used it (its dns check asked the pod's resolv.conf, as nodeready does): "+
			"remove it, or write DNS_NAMESERVER="+net.JoinHostPort(ip, "53")+" to ask that server"))
	}
	if v := os.Getenv("KLOG_VERBOSITY"); v != "" {
		n, err := strconv.ParseInt(v, 0, strconv.IntSize)
		switch {
		case err != nil:
			bad.Collect(refuse("KLOG_VERBOSITY", v, envvar.WholeNumber))
		case n > 0:
			bad.Collect(refuse("KLOG_VERBOSITY", v, "nodeready's log level, client-go's klog lines included, is LOG_LEVEL: remove it, and write LOG_LEVEL=debug for more detail"))
		}
	}
	return bad.Err()
}

// fromDeleteFailedNode resolves DELETE_FAILED_NODE, the original
// kube-node-ready switch, into FAILURE_ACTION=replace-node.
func (c *Config) fromDeleteFailedNode() error {
	if !c.DeleteFailedNode {
		return nil
	}
	if c.FailureAction == FailOpen {
		return refuse("DELETE_FAILED_NODE", "true", "contradicts FAILURE_ACTION=fail-open: set one of them")
	}
	c.FailureAction = ReplaceNode
	return nil
}
