{{/*
The ConfigMap's data, from .Values.config: one line per variable. The
DaemonSet's pod template carries its checksum (checksum/config), so a change
reaches the agents of held nodes as a rollout.
*/}}
{{- define "nodeready.configData" -}}
{{- $c := .Values.config -}}
TAINT_KEY: {{ $c.taintKey | quote }}
TAINT_VALUE: {{ $c.taintValue | quote }}
TAINT_EFFECT: {{ $c.taintEffect | quote }}
EXTRA_TAINTS: {{ join "," $c.extraTaints | quote }}
TAINT_OWNER: {{ $c.taintOwner | quote }}
VERIFIED_LABEL: {{ $c.verifiedLabel | quote }}
VERIFIED_LABEL_VALUE: {{ $c.verifiedLabelValue | quote }}
INITIAL_TIMEOUT: {{ $c.initialTimeout | quote }}
MAX_RETRIES: {{ $c.maxRetries | int64 | quote }}
RETRY_BACKOFF: {{ $c.retryBackoff | quote }}
RETRY_BACKOFF_BASE: {{ $c.retryBackoffBase | quote }}
RETRY_BACKOFF_MAX: {{ $c.retryBackoffMax | quote }}
CHECK_TIMEOUT: {{ $c.checkTimeout | quote }}
SETTLE_TIME: {{ $c.settleTime | quote }}
CHECKS: {{ join "," $c.checks | quote }}
DNS_TEST_DOMAINS: {{ join "," $c.dnsTestDomains | quote }}
DNS_NAMESERVER: {{ $c.dnsNameserver | quote }}
CLUSTER_DNS_SERVICE: {{ $c.clusterDNSService | quote }}
TCP_TARGETS: {{ join "," $c.tcpTargets | quote }}
HTTP_URLS: {{ join "," $c.httpURLs | quote }}
HTTP_EXPECTED_STATUS: {{ $c.httpExpectedStatus | quote }}
HTTP_CA_FILE: {{ $c.httpCAFile | quote }}
APISERVER_PROBE: {{ $c.apiserverProbe | quote }}
CLOCK_MAX_SKEW: {{ $c.clockMaxSkew | quote }}
ENDPOINTS_SERVICE: {{ $c.endpointsService | quote }}
ENDPOINTS_CONNECT: {{ $c.endpointsConnect | quote }}
POD_NETWORK_SERVICE: {{ $c.podNetworkService | quote }}
POD_NETWORK_PORT: {{ $c.podNetworkPort | quote }}
POD_NETWORK_HTTP_PATH: {{ $c.podNetworkHTTPPath | quote }}
POD_NETWORK_NODES: {{ $c.podNetworkNodes | int64 | quote }}
NETWORKPOLICY_CANARY: {{ $c.networkPolicyCanary | default (printf "%s/%s-canary" .Release.Namespace (include "nodeready.name" .)) | quote }}
DAEMONSETS: {{ join "," $c.daemonSets | quote }}
DAEMONSETS_SELECTOR: {{ $c.daemonSetsSelector | quote }}
DAEMONSETS_EXCLUDE: {{ join "," $c.daemonSetsExclude | quote }}
NODE_CONDITIONS: {{ join "," $c.nodeConditions | quote }}
REQUIRED_RESOURCES: {{ join "," $c.requiredResources | quote }}
CSI_DRIVERS: {{ join "," $c.csiDrivers | quote }}
CSI_REQUIRE_ALLOCATABLE: {{ $c.csiRequireAllocatable | quote }}
DRA_DEVICES: {{ join "," $c.draDevices | quote }}
CHECK_COMMAND: {{ $c.checkCommand | quote }}
CHECK_COMMAND_ARGS: {{ join "," $c.checkCommandArgs | quote }}
MIN_HOLD_TIME: {{ $c.minHoldTime | quote }}
FAILURE_ACTION: {{ $c.failureAction | quote }}
FAIL_OPEN_AFTER: {{ $c.failOpenAfter | quote }}
DELETE_FAILED_NODE: {{ $c.deleteFailedNode | quote }}
FLEET_WINDOW: {{ $c.fleetWindow | quote }}
SHARED_FAULT_PERCENTAGE: {{ $c.sharedFaultPercentage | int64 | quote }}
REVERIFY_TAINT: {{ $c.reverifyTaint | quote }}
DRY_RUN: {{ $c.dryRun | quote }}
ENABLE_METRICS: {{ $c.enableMetrics | quote }}
METRICS_PORT: {{ $c.metricsPort | int64 | quote }}
METRICS_FINAL_SCRAPE_TIMEOUT: {{ $c.metricsFinalScrapeTimeout | default "0s" | quote }}
LOG_LEVEL: {{ $c.logLevel | quote }}
LOG_FORMAT: {{ $c.logFormat | quote }}
{{- end -}}

{{/*
The data of nodeready-monitoring (manifests/monitoring/podmonitor.yaml), which
the agents read after nodeready-config: with podMonitor.enabled they wait for
a final scrape, 24s unless config.metricsFinalScrapeTimeout says otherwise.
*/}}
{{- define "nodeready.monitoringData" -}}
METRICS_FINAL_SCRAPE_TIMEOUT: {{ .Values.config.metricsFinalScrapeTimeout | default "24s" | quote }}
{{- end -}}
