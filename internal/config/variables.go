package config

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// Variable documents one environment variable: its name, its default and
// what it means.
type Variable struct {
	Name, Default, Description string
}

// Variables lists every environment variable the agent reads, in the order
// of `nodeready --help`. The README's configuration table is checked against
// it, so neither can drift from the code.
func Variables() []Variable {
	var l loader
	vars := l.variables()
	out := make([]Variable, len(vars))
	for i, v := range vars {
		out[i] = v.Variable
	}
	return out
}

// PrintVariables writes the variables as an aligned table.
func PrintVariables(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VARIABLE\tDEFAULT\tMEANING")
	for _, v := range Variables() {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", v.Name, v.Default, v.Description)
	}
	_ = tw.Flush()
}

// env is a variable: its name, its default, where its value is read into,
// and what it means.
func env(name, def string, r reader, desc string) variable {
	return variable{Variable{Name: name, Default: def, Description: desc}, r}
}

// variables binds every variable to the place its value is read into: a
// field of the configuration, or of the loader where validate parses it
// further.
func (l *loader) variables() []variable {
	c := &l.c
	return []variable{
		env("NODE_NAME", "", text(&c.NodeName), "Name of the node to verify (downward API spec.nodeName); required unless --dry-run"),
		env("POD_NAME", "", text(&c.PodName), "Own pod name (downward API), for logs and Events"),
		env("POD_NAMESPACE", "", text(&c.PodNamespace), "Own pod namespace (downward API), for logs and Events"),

		env("TAINT_KEY", "node-ready/unverified", text(&l.taintKey), "Key of the startup taint to remove"),
		env("TAINT_VALUE", "true", text(&l.taintValue), "Value of the startup taint (informational: every taint with the key and effect is removed)"),
		env("TAINT_EFFECT", "NoSchedule", text(&l.taintEffect), "Effect of the startup taint: NoSchedule, PreferNoSchedule or NoExecute"),
		env("EXTRA_TAINTS", "", list(&l.extraTaints), "More startup taints, removed in the same write as TAINT_KEY's and held on the same terms: key[=value]:effect, comma-separated (the kubelet's --register-with-taints form); for a node held under several names, such as a readiness.k8s.io/ taint and a startup-taint.cluster-autoscaler.kubernetes.io/ one"),
		env("TAINT_OWNER", "nodeready", text(&c.TaintOwner), "Who removes the startup taint: nodeready, in the release's write, or external: a controller such as node-readiness-controller (a NodeReadinessRule on node-ready/Verified) removes TAINT_KEY's taint when the condition turns True; nodeready writes the condition, then the label, and never a taint (TAINT_KEY still tells a node it holds)"),
		env("VERIFIED_LABEL", "node-ready/verified", text(&c.VerifiedLabel), "Label added to a verified node; the DaemonSet's node affinity must use the same key"),
		env("VERIFIED_LABEL_VALUE", "true", text(&c.VerifiedLabelValue), "Value of the verified label"),

		env("INITIAL_TIMEOUT", "300s", duration(&c.InitialTimeout), "Time from the agent's first start in its pod after which failing checks are recorded as a failed verification"),
		env("MAX_RETRIES", "5", integer(&c.MaxRetries), "Rounds of checks after which failing checks are recorded as a failed verification"),
		env("RETRY_BACKOFF", "exponential", text(&c.RetryBackoff), "Delay between rounds: exponential, linear or constant"),
		env("RETRY_BACKOFF_BASE", "1s", duration(&c.RetryBackoffBase), "First delay between rounds (every delay with constant and linear); unset with linear, it is 5s, kube-node-ready's delay"),
		env("RETRY_BACKOFF_MAX", "30s", duration(&c.RetryBackoffMax), "Longest delay between rounds; after a recorded failure, checks repeat at this interval"),
		env("CHECK_TIMEOUT", "10s", duration(&c.CheckTimeout), "Time limit of one check in one round"),
		env("SETTLE_TIME", "2s", duration(&c.SettleTime), "After the release, watch the own node this long and release it again if the startup taint comes back or the label goes (so a `kubectl label node NODE node-ready/verified-` in that window is undone: re-verify once the agent pod is gone); 0 turns it off; keep it well below the pod's terminationGracePeriodSeconds"),

		env("CHECKS", "dns,tcp,apiserver,endpoints", list(&l.checks), "Checks to run, comma-separated: dns, tcp, http, apiserver, endpoints, podnetwork, and the gates daemonsets, conditions, resources, csi, dra, command"),

		env("DNS_TEST_DOMAINS", "kubernetes.default.svc.cluster.local", list(&c.DNSTestDomains), "dns: names that must resolve"),
		env("DNS_NAMESERVER", "", text(&c.DNSNameserver), "dns: host:port of the nameserver to ask; empty for the pod's resolv.conf"),
		env("CLUSTER_DNS_SERVICE", "kube-system/kube-dns", text(&l.clusterDNS), "dns: namespace/name of the cluster DNS Service; while its EndpointSlices have no ready endpoint anywhere, a failing dns check is reported as not checkable instead of holding the node (no node could pass it, and DNS pods may need a released node to run on); empty turns this off"),

		env("TCP_TARGETS", "", list(&l.tcpTargets), "tcp: host:port list to connect to; empty for the API server's service address KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT"),
		env("KUBERNETES_SERVICE_HOST", "", text(&l.serviceHost), "Set by the kubelet in every pod; the default tcp target"),
		env("KUBERNETES_SERVICE_PORT", "443", text(&l.servicePort), "Set by the kubelet in every pod; the default tcp target's port"),

		env("HTTP_URLS", "", list(&c.HTTPURLs), "http: URLs to GET; required when CHECKS has http"),
		env("HTTP_EXPECTED_STATUS", "2xx", text(&l.httpStatus), "http: accepted status codes, such as 2xx, 200 or 200,204"),
		env("HTTP_CA_FILE", "", text(&l.httpCAFile), "http: PEM file of CA certificates to trust instead of the system roots"),

		env("APISERVER_PROBE", "readyz", text(&c.APIServerProbe), "apiserver: readyz (GET /readyz) or node (GET the own Node)"),

		env("ENDPOINTS_SERVICE", "default/kubernetes", text(&l.endpoints), "endpoints: namespace/name of the Service whose EndpointSlices must have a ready endpoint"),
		env("ENDPOINTS_CONNECT", "true", boolean(&c.EndpointsConnect), "endpoints: also connect to one ready endpoint directly, bypassing the Service"),

		env("POD_NETWORK_SERVICE", "", text(&l.podNetworkService), "podnetwork: namespace/name of the Service whose ready pods on other nodes are reached directly by pod IP; empty for CLUSTER_DNS_SERVICE's pods, each asked a DNS query (any answer proves the path)"),
		env("POD_NETWORK_PORT", "", text(&l.podNetworkPort), "podnetwork: the port, by name or number, in the Service's EndpointSlices; empty for the first UDP port of the cluster DNS, else the first TCP port"),
		env("POD_NETWORK_HTTP_PATH", "", text(&l.podNetworkPath), "podnetwork: with POD_NETWORK_SERVICE, GET this path from each pod (any HTTP status is an answer); empty for a TCP connection"),
		env("POD_NETWORK_NODES", "3", integer(&c.PodNetworkNodes), "podnetwork: how many other nodes to reach a pod on, taken in turn from each zone (topology.kubernetes.io/zone)"),

		env("DAEMONSETS", "", list(&c.DaemonSets), "daemonsets: namespace/name of the DaemonSets that must have a Ready pod on the node; empty to discover every DaemonSet that runs on the node before and after the release"),
		env("DAEMONSETS_SELECTOR", "", text(&l.daemonSetsSelector), "daemonsets: label selector that limits discovery, such as tier=node; empty for every DaemonSet"),
		env("DAEMONSETS_EXCLUDE", "", list(&c.DaemonSetsExclude), "daemonsets: namespace/name of DaemonSets that discovery leaves out"),

		env("NODE_CONDITIONS", "Ready=True", list(&l.conditions), "conditions: Type=Status pairs the node must report, such as Ready=True,NetworkUnavailable=False"),

		env("REQUIRED_RESOURCES", "", list(&l.resources), "resources: minimums of the node's allocatable resources, such as nvidia.com/gpu>=1,example.com/fpga>=2; required when CHECKS has resources"),

		env("CSI_DRIVERS", "", list(&c.CSIDrivers), "csi: CSI drivers that must be registered in the node's CSINode, such as ebs.csi.aws.com; required when CHECKS has csi"),
		env("CSI_REQUIRE_ALLOCATABLE", "true", boolean(&c.CSIRequireAllocatable), "csi: also require the driver's allocatable volume count; false for drivers that report no volume limit"),

		env("DRA_DEVICES", "", list(&l.devices), "dra: DRA drivers and the least number of devices each must publish for the node in complete ResourceSlice pools, such as gpu.nvidia.com>=8 or gpu.nvidia.com[productName=NVIDIA A100-SXM4-80GB]>=8; required when CHECKS has dra"),

		env("CHECK_COMMAND", "", text(&c.CommandPath), "command: absolute path of a program that passes by exiting 0, run without a shell; required when CHECKS has command"),
		env("CHECK_COMMAND_ARGS", "", list(&c.CommandArgs), "command: its arguments, comma-separated (an argument cannot contain a comma)"),

		env("STATE_DIR", "", text(&c.StateDir), "Directory that outlives a container restart (an emptyDir of the pod): the agent records its first start there, so INITIAL_TIMEOUT, FAIL_OPEN_AFTER and MIN_HOLD_TIME count from the pod's first start, not the container's; empty counts from the process start"),

		env("MIN_HOLD_TIME", "0s", duration(&c.MinHoldTime), "Keep the node tainted at least this long after the agent first started in its pod, for caches that need time; checks that pass earlier run once more when it ends; 0s turns it off"),

		env("FAILURE_ACTION", "keep-tainted", text(&c.FailureAction), "What a failed verification of a node nodeready holds (it had the startup taint when the agent started) does: keep-tainted (keep checking), fail-open (release after FAIL_OPEN_AFTER) or replace-node (delete the node's Karpenter NodeClaim, else the Node, never a control-plane node; needs manifests/replace-node/); a misconfiguration (a refused release or check) never brings it on"),
		env("FAIL_OPEN_AFTER", "30m", duration(&c.FailOpenAfter), "fail-open: time from the agent's first start in its pod after which a node it holds with failing checks is released anyway"),
		env("DELETE_FAILED_NODE", "false", boolean(&l.deleteFailedNode), "kube-node-ready's name for FAILURE_ACTION=replace-node; true selects it"),
		env("REVERIFY_TAINT", "false", boolean(&c.ReverifyTaint), "Put the startup taint back when the agent starts on a node that nodeready verified before (its completion annotation is there) and that has neither the label nor the taint any more (re-verification after the label was removed), so no new workloads land while it is checked again; never on a node nodeready has not verified"),

		env("DRY_RUN", "false", boolean(&c.ReadOnly), "kube-node-ready's read-only switch: true runs the rounds of checks and logs each write the agent would make, but writes nothing (no label, taint, condition, Event or deletion)"),

		env("ENABLE_METRICS", "true", boolean(&c.EnableMetrics), "Serve /metrics (the /healthz and /readyz probes are served either way)"),
		env("METRICS_PORT", "8080", port(&c.MetricsPort), "Port of /metrics, /healthz and /readyz"),
		env("LOG_LEVEL", "info", text(&c.LogLevel), "trace, debug, info, warn or error"),
		env("LOG_FORMAT", "json", text(&c.LogFormat), "json, or console for people"),
	}
}
