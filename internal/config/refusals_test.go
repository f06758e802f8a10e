package config_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestRefusals holds every refusal of the configuration, the agent's and each kind of
// check's: each value stops the agent before any API call, naming its variable. The
// chart's test walks these (and every other refusal the tests assert) through helm, so
// that what the agent refuses fails `helm install` too.
func TestRefusals(t *testing.T) {
	long := "example.com/" + strings.Repeat("v", 55)
	for _, tt := range []struct {
		env     map[string]string
		refused string
	}{
		{map[string]string{"TAINT_KEY": "a/b/c"}, "TAINT_KEY"},
		{map[string]string{"TAINT_VALUE": "a b"}, "TAINT_VALUE"},
		{map[string]string{"TAINT_EFFECT": "Sometimes"}, "TAINT_EFFECT"},
		{map[string]string{"EXTRA_TAINTS": "readiness.k8s.io/x"}, "EXTRA_TAINTS"},
		{map[string]string{"EXTRA_TAINTS": "a.io/x:NoSchedule,a.io/x=again:NoSchedule"}, "EXTRA_TAINTS"},
		{map[string]string{"EXTRA_TAINTS": "node-ready/unverified=other:NoSchedule"}, "EXTRA_TAINTS"},
		{map[string]string{"TAINT_OWNER": "nrc"}, "TAINT_OWNER"},
		{map[string]string{"TAINT_OWNER": "external", "EXTRA_TAINTS": "readiness.k8s.io/x:NoSchedule"}, "EXTRA_TAINTS"},
		{map[string]string{"TAINT_OWNER": "external", "REVERIFY_TAINT": "true"}, "REVERIFY_TAINT"},
		{map[string]string{"TAINT_OWNER": "external", "FAILURE_ACTION": "fail-open"}, "FAILURE_ACTION"},
		{map[string]string{"VERIFIED_LABEL": "node ready"}, "VERIFIED_LABEL"},
		{map[string]string{"VERIFIED_LABEL": long}, "VERIFIED_LABEL"},
		{map[string]string{"VERIFIED_LABEL_VALUE": "a b"}, "VERIFIED_LABEL_VALUE"},
		{map[string]string{"VERIFIED_LABEL_VALUE": "failed-open"}, "VERIFIED_LABEL_VALUE"},
		{map[string]string{"INITIAL_TIMEOUT": "0s"}, "INITIAL_TIMEOUT"},
		{map[string]string{"INITIAL_TIMEOUT": "ten"}, "INITIAL_TIMEOUT"},
		{map[string]string{"MAX_RETRIES": "0"}, "MAX_RETRIES"},
		{map[string]string{"MAX_RETRIES": "many"}, "MAX_RETRIES"},
		{map[string]string{"RETRY_BACKOFF": "fibonacci"}, "RETRY_BACKOFF"},
		{map[string]string{"RETRY_BACKOFF_BASE": "0s"}, "RETRY_BACKOFF_BASE"},
		{map[string]string{"RETRY_BACKOFF_BASE": "2s", "RETRY_BACKOFF_MAX": "1s"}, "RETRY_BACKOFF_MAX"},
		{map[string]string{"CHECK_TIMEOUT": "0s"}, "CHECK_TIMEOUT"},
		{map[string]string{"SETTLE_TIME": "20s"}, "SETTLE_TIME"},
		{map[string]string{"SETTLE_TIME": "-1s"}, "SETTLE_TIME"},
		{map[string]string{"METRICS_FINAL_SCRAPE_TIMEOUT": "25s"}, "METRICS_FINAL_SCRAPE_TIMEOUT"},
		{map[string]string{"METRICS_FINAL_SCRAPE_TIMEOUT": "-1s"}, "METRICS_FINAL_SCRAPE_TIMEOUT"},
		{map[string]string{"CHECKS": "dns,dsn"}, "CHECKS"},
		{map[string]string{"CHECKS": "dns,dns"}, "CHECKS"},
		{map[string]string{"CHECKS": ","}, "CHECKS"},
		{map[string]string{"MIN_HOLD_TIME": "-1s"}, "MIN_HOLD_TIME"},
		{map[string]string{"FAILURE_ACTION": "reboot"}, "FAILURE_ACTION"},
		{map[string]string{"FAILURE_ACTION": "fail-open", "FAIL_OPEN_AFTER": "0s"}, "FAIL_OPEN_AFTER"},
		{map[string]string{"FAILURE_ACTION": "fail-open", "DELETE_FAILED_NODE": "true"}, "DELETE_FAILED_NODE"},
		{map[string]string{"DELETE_FAILED_NODE": "maybe"}, "DELETE_FAILED_NODE"},
		{map[string]string{"FLEET_WINDOW": "30s"}, "FLEET_WINDOW"},
		{map[string]string{"FLEET_WINDOW": "25h"}, "FLEET_WINDOW"},
		{map[string]string{"FLEET_WINDOW": "soon"}, "FLEET_WINDOW"},
		{map[string]string{"SHARED_FAULT_PERCENTAGE": "0"}, "SHARED_FAULT_PERCENTAGE"},
		{map[string]string{"SHARED_FAULT_PERCENTAGE": "101"}, "SHARED_FAULT_PERCENTAGE"},
		{map[string]string{"SHARED_FAULT_PERCENTAGE": "half"}, "SHARED_FAULT_PERCENTAGE"},
		{map[string]string{"REVERIFY_TAINT": "maybe"}, "REVERIFY_TAINT"},
		{map[string]string{"REVERIFY_TAINT": "true", "TAINT_EFFECT": "NoExecute"}, "TAINT_EFFECT"},
		{map[string]string{"REVERIFY_TAINT": "true", "EXTRA_TAINTS": "example.com/y:NoExecute"}, "EXTRA_TAINTS"},
		{map[string]string{"DRY_RUN": "maybe"}, "DRY_RUN"},
		{map[string]string{"ENABLE_METRICS": "yes"}, "ENABLE_METRICS"},
		{map[string]string{"METRICS_PORT": "0"}, "METRICS_PORT"},
		{map[string]string{"METRICS_PORT": "65536"}, "METRICS_PORT"},
		{map[string]string{"METRICS_PORT": "010"}, "METRICS_PORT"},
		{map[string]string{"LOG_LEVEL": "verbose"}, "LOG_LEVEL"},
		{map[string]string{"LOG_FORMAT": "logfmt"}, "LOG_FORMAT"},

		{map[string]string{"DNS_TEST_DOMAINS": ","}, "DNS_TEST_DOMAINS"},
		{map[string]string{"DNS_TEST_DOMAINS": "bad_name!"}, "DNS_TEST_DOMAINS"},
		{map[string]string{"DNS_NAMESERVER": "10.96.0.10"}, "DNS_NAMESERVER"},
		{map[string]string{"CLUSTER_DNS_SERVICE": "a/b/c"}, "CLUSTER_DNS_SERVICE"},
		{map[string]string{"TCP_TARGETS": "10.0.0.1"}, "TCP_TARGETS"},
		{map[string]string{"TCP_TARGETS": "db.example:0"}, "TCP_TARGETS"},
		{map[string]string{"CHECKS": "http"}, "HTTP_URLS"},
		{map[string]string{"HTTP_URLS": "ftp://example.com/x"}, "HTTP_URLS"},
		{map[string]string{"HTTP_EXPECTED_STATUS": "600"}, "HTTP_EXPECTED_STATUS"},
		{map[string]string{"APISERVER_PROBE": "ping"}, "APISERVER_PROBE"},
		{map[string]string{"CLOCK_MAX_SKEW": "1s"}, "CLOCK_MAX_SKEW"},
		{map[string]string{"CLOCK_MAX_SKEW": "1999ms"}, "CLOCK_MAX_SKEW"},
		{map[string]string{"CLOCK_MAX_SKEW": "-5s"}, "CLOCK_MAX_SKEW"},
		{map[string]string{"CLOCK_MAX_SKEW": "five"}, "CLOCK_MAX_SKEW"},
		{map[string]string{"NETWORKPOLICY_CANARY": "Kube-System/canary"}, "NETWORKPOLICY_CANARY"},
		{map[string]string{"NETWORKPOLICY_CANARY": "a/b/c"}, "NETWORKPOLICY_CANARY"},
		{map[string]string{"ENDPOINTS_SERVICE": "Default/Kubernetes"}, "ENDPOINTS_SERVICE"},
		{map[string]string{"ENDPOINTS_CONNECT": "maybe"}, "ENDPOINTS_CONNECT"},
		{map[string]string{"POD_NETWORK_NODES": "0"}, "POD_NETWORK_NODES"},
		{map[string]string{"POD_NETWORK_PORT": "0"}, "POD_NETWORK_PORT"},
		{map[string]string{"POD_NETWORK_PORT": "99999"}, "POD_NETWORK_PORT"},
		{map[string]string{"POD_NETWORK_PORT": "no such port!"}, "POD_NETWORK_PORT"},
		{map[string]string{"POD_NETWORK_SERVICE": "a/b/c"}, "POD_NETWORK_SERVICE"},
		{map[string]string{"POD_NETWORK_SERVICE": "apps/web", "POD_NETWORK_HTTP_PATH": "healthz"}, "POD_NETWORK_HTTP_PATH"},
		{map[string]string{"POD_NETWORK_SERVICE": "apps/web", "POD_NETWORK_HTTP_PATH": "/%zz"}, "POD_NETWORK_HTTP_PATH"},
		{map[string]string{"POD_NETWORK_HTTP_PATH": "/healthz"}, "POD_NETWORK_HTTP_PATH"},
		{map[string]string{"CHECKS": "podnetwork", "CLUSTER_DNS_SERVICE": ""}, "POD_NETWORK_SERVICE"},
		{map[string]string{"DAEMONSETS": "cilium"}, "DAEMONSETS"},
		{map[string]string{"DAEMONSETS_SELECTOR": "tier in ("}, "DAEMONSETS_SELECTOR"},
		{map[string]string{"DAEMONSETS": "kube-system/cilium", "DAEMONSETS_SELECTOR": "tier=node"}, "DAEMONSETS_SELECTOR"},
		{map[string]string{"DAEMONSETS_EXCLUDE": "cilium"}, "DAEMONSETS_EXCLUDE"},
		{map[string]string{"DAEMONSETS": "kube-system/cilium", "DAEMONSETS_EXCLUDE": "kube-system/other"}, "DAEMONSETS_EXCLUDE"},
		{map[string]string{"CHECKS": "conditions", "NODE_CONDITIONS": ","}, "NODE_CONDITIONS"},
		{map[string]string{"NODE_CONDITIONS": "Ready"}, "NODE_CONDITIONS"},
		{map[string]string{"NODE_CONDITIONS": "Ready=Yes"}, "NODE_CONDITIONS"},
		{map[string]string{"NODE_CONDITIONS": "Ready=True,Ready=False"}, "NODE_CONDITIONS"},
		{map[string]string{"CHECKS": "resources"}, "REQUIRED_RESOURCES"},
		{map[string]string{"REQUIRED_RESOURCES": "nvidia.com/gpu"}, "REQUIRED_RESOURCES"},
		{map[string]string{"REQUIRED_RESOURCES": "nvidia.com/gpu>=-1"}, "REQUIRED_RESOURCES"},
		{map[string]string{"REQUIRED_RESOURCES": "nvidia.com/gpu>=1,nvidia.com/gpu>=2"}, "REQUIRED_RESOURCES"},
		{map[string]string{"CHECKS": "csi"}, "CSI_DRIVERS"},
		{map[string]string{"CSI_DRIVERS": "Not A Driver"}, "CSI_DRIVERS"},
		{map[string]string{"CSI_REQUIRE_ALLOCATABLE": "maybe"}, "CSI_REQUIRE_ALLOCATABLE"},
		{map[string]string{"CHECKS": "dra"}, "DRA_DEVICES"},
		{map[string]string{"DRA_DEVICES": "gpu.nvidia.com>=0"}, "DRA_DEVICES"},
		{map[string]string{"DRA_DEVICES": "gpu.nvidia.com>=1,gpu.nvidia.com>=8"}, "DRA_DEVICES"},
		{map[string]string{"CHECKS": "command"}, "CHECK_COMMAND"},
		{map[string]string{"CHECK_COMMAND": "warmup.sh"}, "CHECK_COMMAND"},
		{map[string]string{"CHECK_COMMAND_ARGS": "--fast"}, "CHECK_COMMAND_ARGS"},
	} {
		t.Run(fmt.Sprint(tt.env), func(t *testing.T) {
			_, err := load(t, with(inPod, tt.env), false)
			requireRefused(t, err, tt.refused)
		})
	}
}
