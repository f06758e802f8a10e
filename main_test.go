package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"

	"github.com/nodeready/nodeready/agent"
	"github.com/nodeready/nodeready/internal/config/configtest"
	"github.com/nodeready/nodeready/internal/wiring"
)

// cleanEnv unsets every variable the agent reads, then sets base, so a test
// sees only what it sets (an empty variable is not the same as an unset one).
func cleanEnv(t *testing.T, base map[string]string) {
	t.Helper()
	for _, name := range []string{"KUBECONFIG", "HOME", wiring.CAEnv} {
		t.Setenv(name, "") // restores the old value after the test
		require.NoError(t, os.Unsetenv(name))
	}
	configtest.Setenv(t, base)
}

// countingClient fails the test's promise if it is ever called.
type countingClient struct{ calls int }

func (c *countingClient) new(bool, zerolog.Logger) (agent.Clients, error) {
	c.calls++
	return agent.Clients{}, nil
}

func TestBadConfigurationStopsBeforeAnyClient(t *testing.T) {
	valid := map[string]string{"NODE_NAME": "node-a", "KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
	tests := []struct {
		name string
		env  map[string]string
		want string // the variable the message must name
	}{
		{"node name missing", map[string]string{"NODE_NAME": ""}, "NODE_NAME"},
		{"node name invalid", map[string]string{"NODE_NAME": "Node_A"}, "NODE_NAME"},
		{"taint key empty", map[string]string{"TAINT_KEY": ""}, "TAINT_KEY"},
		{"taint key two slashes", map[string]string{"TAINT_KEY": "a/b/c"}, "TAINT_KEY"},
		{"taint value with space", map[string]string{"TAINT_VALUE": "not ready"}, "TAINT_VALUE"},
		{"taint effect unknown", map[string]string{"TAINT_EFFECT": "NoRun"}, "TAINT_EFFECT"},
		{"taint effect wrong case", map[string]string{"TAINT_EFFECT": "noschedule"}, "TAINT_EFFECT"},
		{"label key invalid", map[string]string{"VERIFIED_LABEL": "bad key!"}, "VERIFIED_LABEL"},
		{"label value too long", map[string]string{"VERIFIED_LABEL_VALUE": strings.Repeat("x", 64)}, "VERIFIED_LABEL_VALUE"},
		{"timeout without unit", map[string]string{"INITIAL_TIMEOUT": "300"}, "INITIAL_TIMEOUT"},
		{"timeout negative", map[string]string{"INITIAL_TIMEOUT": "-5s"}, "INITIAL_TIMEOUT"},
		{"timeout zero", map[string]string{"INITIAL_TIMEOUT": "0s"}, "INITIAL_TIMEOUT"},
		{"retries negative", map[string]string{"MAX_RETRIES": "-1"}, "MAX_RETRIES"},
		{"retries zero", map[string]string{"MAX_RETRIES": "0"}, "MAX_RETRIES"},
		{"retries not a number", map[string]string{"MAX_RETRIES": "five"}, "MAX_RETRIES"},
		{"backoff unknown", map[string]string{"RETRY_BACKOFF": "fibonacci"}, "RETRY_BACKOFF"},
		{"backoff base zero", map[string]string{"RETRY_BACKOFF_BASE": "0s"}, "RETRY_BACKOFF_BASE"},
		{"backoff cap below base", map[string]string{"RETRY_BACKOFF_MAX": "100ms"}, "RETRY_BACKOFF_MAX"},
		{"check timeout without unit", map[string]string{"CHECK_TIMEOUT": "10"}, "CHECK_TIMEOUT"},
		{"unknown check", map[string]string{"CHECKS": "dns,ping"}, "CHECKS"},
		{"no checks", map[string]string{"CHECKS": " , "}, "CHECKS"}, // empty means the default
		{"connectivity matrix neither true nor false", map[string]string{"ENABLE_CONNECTIVITY_MATRIX": "maybe"}, "ENABLE_CONNECTIVITY_MATRIX"},
		{"check twice", map[string]string{"CHECKS": "dns,tcp,dns"}, "CHECKS"},
		{"dns without names", map[string]string{"DNS_TEST_DOMAINS": " , "}, "DNS_TEST_DOMAINS"},
		{"dns name invalid", map[string]string{"DNS_TEST_DOMAINS": "kubernetes.default,bad_name!.com"}, "DNS_TEST_DOMAINS"},
		{"nameserver without port", map[string]string{"DNS_NAMESERVER": "10.96.0.10"}, "DNS_NAMESERVER"},
		{"tcp target without port", map[string]string{"TCP_TARGETS": "10.0.0.1"}, "TCP_TARGETS"},
		{"tcp target port out of range", map[string]string{"TCP_TARGETS": "10.0.0.1:443,db:99999"}, "TCP_TARGETS"},
		{"tcp without any target", map[string]string{"KUBERNETES_SERVICE_HOST": ""}, "TCP_TARGETS"},
		{"service port not a number", map[string]string{"KUBERNETES_SERVICE_PORT": "https"}, "KUBERNETES_SERVICE_PORT"},
		{"http without urls", map[string]string{"CHECKS": "http"}, "HTTP_URLS"},
		{"http url wrong scheme", map[string]string{"CHECKS": "http", "HTTP_URLS": "ftp://example.com/"}, "HTTP_URLS"},
		{"http url without host", map[string]string{"CHECKS": "http", "HTTP_URLS": "http://"}, "HTTP_URLS"},
		{"http status out of range", map[string]string{"HTTP_EXPECTED_STATUS": "600"}, "HTTP_EXPECTED_STATUS"},
		{"http status class malformed", map[string]string{"HTTP_EXPECTED_STATUS": "2x"}, "HTTP_EXPECTED_STATUS"},
		{"http ca file missing", map[string]string{"HTTP_CA_FILE": "/nonexistent/ca.pem"}, "HTTP_CA_FILE"},
		{"apiserver probe unknown", map[string]string{"APISERVER_PROBE": "healthz"}, "APISERVER_PROBE"},
		{"endpoints service malformed", map[string]string{"ENDPOINTS_SERVICE": "a/b/c"}, "ENDPOINTS_SERVICE"},
		{"endpoints connect not a bool", map[string]string{"ENDPOINTS_CONNECT": "maybe"}, "ENDPOINTS_CONNECT"},
		{"daemonset without namespace", map[string]string{"DAEMONSETS": "kube-system/cilium,aws-node"}, "DAEMONSETS"},
		{"daemonset name invalid", map[string]string{"DAEMONSETS": "kube-system/Cilium_Agent"}, "DAEMONSETS"},
		{"daemonset selector malformed", map[string]string{"DAEMONSETS_SELECTOR": "tier in (node"}, "DAEMONSETS_SELECTOR"},
		{"daemonset selector with a list", map[string]string{"DAEMONSETS": "kube-system/cilium", "DAEMONSETS_SELECTOR": "tier=node"}, "DAEMONSETS_SELECTOR"},
		{"daemonset exclusion malformed", map[string]string{"DAEMONSETS_EXCLUDE": "cilium"}, "DAEMONSETS_EXCLUDE"},
		{"daemonset exclusion with a list", map[string]string{"DAEMONSETS": "kube-system/cilium", "DAEMONSETS_EXCLUDE": "kube-system/aws-node"}, "DAEMONSETS_EXCLUDE"},
		{"conditions without pairs", map[string]string{"CHECKS": "conditions", "NODE_CONDITIONS": " , "}, "NODE_CONDITIONS"},
		{"condition without status", map[string]string{"NODE_CONDITIONS": "Ready"}, "NODE_CONDITIONS"},
		{"condition status wrong case", map[string]string{"NODE_CONDITIONS": "Ready=true"}, "NODE_CONDITIONS"},
		{"condition type invalid", map[string]string{"NODE_CONDITIONS": "Not Ready=False"}, "NODE_CONDITIONS"},
		{"condition twice", map[string]string{"NODE_CONDITIONS": "Ready=True,Ready=False"}, "NODE_CONDITIONS"},
		{"resources without minimums", map[string]string{"CHECKS": "resources"}, "REQUIRED_RESOURCES"},
		{"resource without operator", map[string]string{"REQUIRED_RESOURCES": "nvidia.com/gpu=1"}, "REQUIRED_RESOURCES"},
		{"resource name invalid", map[string]string{"REQUIRED_RESOURCES": "nvidia.com/g pu>=1"}, "REQUIRED_RESOURCES"},
		{"resource quantity invalid", map[string]string{"REQUIRED_RESOURCES": "nvidia.com/gpu>=lots"}, "REQUIRED_RESOURCES"},
		{"resource quantity negative", map[string]string{"REQUIRED_RESOURCES": "nvidia.com/gpu>=-1"}, "REQUIRED_RESOURCES"},
		{"resource twice", map[string]string{"REQUIRED_RESOURCES": "nvidia.com/gpu>=1,nvidia.com/gpu>=2"}, "REQUIRED_RESOURCES"},
		{"csi without drivers", map[string]string{"CHECKS": "csi"}, "CSI_DRIVERS"},
		{"csi driver invalid", map[string]string{"CSI_DRIVERS": "ebs csi"}, "CSI_DRIVERS"},
		{"csi allocatable not a bool", map[string]string{"CSI_REQUIRE_ALLOCATABLE": "sometimes"}, "CSI_REQUIRE_ALLOCATABLE"},
		{"dra without devices", map[string]string{"CHECKS": "dra"}, "DRA_DEVICES"},
		{"dra driver invalid", map[string]string{"DRA_DEVICES": "GPU_driver>=1"}, "DRA_DEVICES"},
		{"dra count zero", map[string]string{"DRA_DEVICES": "gpu.nvidia.com>=0"}, "DRA_DEVICES"},
		{"dra attribute without value", map[string]string{"DRA_DEVICES": "gpu.nvidia.com[productName]>=1"}, "DRA_DEVICES"},
		{"dra twice", map[string]string{"DRA_DEVICES": "gpu.nvidia.com>=1,gpu.nvidia.com>=2"}, "DRA_DEVICES"},
		{"command missing", map[string]string{"CHECKS": "command"}, "CHECK_COMMAND"},
		{"command relative", map[string]string{"CHECK_COMMAND": "warmup.sh"}, "CHECK_COMMAND"},
		{"command with arguments in the path", map[string]string{"CHECK_COMMAND": "sh -c true"}, "CHECK_COMMAND"},
		{"command arguments without command", map[string]string{"CHECK_COMMAND_ARGS": "--fast"}, "CHECK_COMMAND_ARGS"},
		{"hold without unit", map[string]string{"MIN_HOLD_TIME": "30"}, "MIN_HOLD_TIME"},
		{"hold negative", map[string]string{"MIN_HOLD_TIME": "-30s"}, "MIN_HOLD_TIME"},
		{"hold check is gone", map[string]string{"CHECKS": "dns,hold"}, "CHECKS"},
		{"metrics flag not a bool", map[string]string{"ENABLE_METRICS": "yes please"}, "ENABLE_METRICS"},
		{"metrics port zero", map[string]string{"METRICS_PORT": "0"}, "METRICS_PORT"},
		{"metrics port not a number", map[string]string{"METRICS_PORT": "http"}, "METRICS_PORT"},
		{"verified label too long for its annotations", map[string]string{"VERIFIED_LABEL": "example.com/" + strings.Repeat("v", 55)}, "VERIFIED_LABEL"},
		{"metrics port with a leading zero", map[string]string{"METRICS_PORT": "010"}, "METRICS_PORT"},
		{"metrics port in hex", map[string]string{"METRICS_PORT": "0x1F90"}, "METRICS_PORT"},
		{"log level unknown", map[string]string{"LOG_LEVEL": "verbose"}, "LOG_LEVEL"},
		{"log format unknown", map[string]string{"LOG_FORMAT": "xml"}, "LOG_FORMAT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cleanEnv(t, valid)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			client := &countingClient{}
			code := run(t.Context(), nil, &stdout, &stderr, client.new, time.Now())

			assert.Equal(t, exitConfig, code)
			assert.Zero(t, client.calls, "no client may be created for a bad configuration")
			msg := stderr.String()
			assert.Contains(t, msg, tt.want+"=", "the message names the variable")
			assert.Equal(t, 1, strings.Count(msg, "\n"), "one line: %q", msg)
			assert.Empty(t, stdout.String())
		})
	}
}

// TestEveryBadVariableOnItsLine: several mistakes are named at once, one line each,
// so that a ConfigMap is mended in one go.
func TestEveryBadVariableOnItsLine(t *testing.T) {
	cleanEnv(t, map[string]string{"NODE_NAME": "node-a", "KUBERNETES_SERVICE_HOST": "10.96.0.1",
		"TAINT_EFFECT": "NoRun", "CHECK_TIMEOUT": "10", "CHECKS": "dns,ping"})
	var stdout, stderr bytes.Buffer
	client := &countingClient{}
	code := run(t.Context(), nil, &stdout, &stderr, client.new, time.Now())

	assert.Equal(t, exitConfig, code)
	assert.Zero(t, client.calls)
	lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	require.Len(t, lines, 3, "one line for each: %q", stderr.String())
	for i, name := range []string{"CHECK_TIMEOUT=", "TAINT_EFFECT=", "CHECKS="} {
		assert.Contains(t, lines[i], name)
		assert.True(t, strings.HasPrefix(lines[i], "nodeready: invalid configuration: "), lines[i])
	}
}

// TestLookalikeAndDeprecatedVariablesWarn: a variable that looks like one of nodeready's
// (a typo in the ConfigMap) and a deprecated one are each a Warn line naming them; the
// agent runs on.
func TestLookalikeAndDeprecatedVariablesWarn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	cleanEnv(t, map[string]string{"HOME": t.TempDir(), "CHECKS": "tcp", "TCP_TARGETS": ln.Addr().String(),
		"CHECK_TIMOUT": "5s", "INITIAL_TIMEOUT": "10m"})
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"--dry-run"}, &stdout, &stderr, newClient, time.Now())

	assert.Equal(t, exitOK, code, "a warning, not a refusal: %s", stderr.String())
	warned := map[string]string{}
	for line := range strings.Lines(stderr.String()) {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), "JSON: %q", line)
		if v, ok := m["variable"].(string); ok && m["level"] == "warn" {
			warned[v], _ = m["hint"].(string)
		}
	}
	assert.Contains(t, warned["CHECK_TIMOUT"], "CHECK_TIMEOUT", "named with the variable it looks like")
	assert.Contains(t, warned["INITIAL_TIMEOUT"], "MAX_RETRIES", "deprecated, with what to set instead")
	assert.Len(t, warned, 2)
}

// TestClientGoLogsThroughTheAgentsLogger: once the agent has started, what client-go
// logs through klog is a JSON line of the agent's logger on its stderr.
func TestClientGoLogsThroughTheAgentsLogger(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	cleanEnv(t, map[string]string{"HOME": t.TempDir(), "CHECKS": "tcp", "TCP_TARGETS": ln.Addr().String(), "NODE_NAME": "node-a"})
	t.Cleanup(klog.ClearLogger)
	var stdout, stderr bytes.Buffer
	require.Equal(t, exitOK, run(t.Context(), []string{"--dry-run"}, &stdout, &stderr, newClient, time.Now()), stderr.String())

	stderr.Reset()
	klog.Background().Error(errors.New("connection refused"), "Failed to watch", "reflector", "nodepatch/watch.go")
	var line map[string]any
	require.NoError(t, json.Unmarshal(stderr.Bytes(), &line), "one JSON line: %q", stderr.String())
	assert.Equal(t, "client-go", line["source"])
	assert.Equal(t, "node-a", line["node"])
	assert.Equal(t, "connection refused", line["error"])
}

func TestFlags(t *testing.T) {
	cleanEnv(t, nil)
	tests := []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"--version"}, exitOK, "nodeready dev", ""},
		{[]string{"--help"}, exitOK, "", "DNS_TEST_DOMAINS"},
		{[]string{"--no-such-flag"}, exitConfig, "", "flag provided but not defined"},
		{[]string{"verify"}, exitConfig, "", `unexpected argument "verify"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			client := &countingClient{}
			assert.Equal(t, tt.code, run(t.Context(), tt.args, &stdout, &stderr, client.new, time.Now()))
			assert.Contains(t, stdout.String(), tt.stdout)
			assert.Contains(t, stderr.String(), tt.stderr)
			assert.Zero(t, client.calls)
		})
	}
}

// TestNoop is the command of the pre-pull variant's warm-up init containers:
// it must exit 0 at once in any image, whatever the environment, and write
// nothing.
func TestNoop(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"no environment", []string{"noop"}, nil},
		{"bad configuration is not read", []string{"noop"}, map[string]string{"TAINT_EFFECT": "NoRun", "CHECKS": "ping"}},
		{"arguments are ignored", []string{"noop", "--dry-run", "extra"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cleanEnv(t, tt.env)
			var stdout, stderr bytes.Buffer
			client := &countingClient{}
			start := time.Now()

			code := run(t.Context(), tt.args, &stdout, &stderr, client.new, start)

			assert.Equal(t, exitOK, code)
			assert.Empty(t, stdout.String())
			assert.Empty(t, stderr.String())
			assert.Zero(t, client.calls)
			assert.Less(t, time.Since(start), time.Second)
		})
	}
}

// TestDryRunWithoutKubeconfig runs --dry-run as a laptop would: no
// kubeconfig, no in-cluster configuration. The API checks are skipped, the
// others run, and the exit code follows the checks that ran.
func TestDryRunWithoutKubeconfig(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedAddr := closed.Addr().String()
	require.NoError(t, closed.Close())

	tests := []struct {
		name   string
		target string
		code   int
		result string
	}{
		{"reachable target passes", ln.Addr().String(), exitOK, "1 passed, 0 failed, 0 misconfigured, 2 skipped"},
		{"refused target fails", closedAddr, exitFailed, "0 passed, 1 failed, 0 misconfigured, 2 skipped"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cleanEnv(t, map[string]string{"HOME": t.TempDir(), "CHECKS": "tcp,apiserver,endpoints", "TCP_TARGETS": tt.target})
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), []string{"--dry-run"}, &stdout, &stderr, newClient, time.Now())

			assert.Equal(t, tt.code, code, "stderr: %s", stderr.String())
			out := stdout.String()
			assert.Contains(t, out, "CHECK")
			assert.Regexp(t, `(?m)^apiserver\s+-\s+skip\s.*no kubeconfig`, out)
			assert.Regexp(t, `(?m)^endpoints\s+default/kubernetes\s+skip\s`, out)
			assert.Contains(t, out, tt.result)
		})
	}
}

// TestDryRunConnectivityMatrix: kube-node-ready's ENABLE_CONNECTIVITY_MATRIX=true adds the
// podnetwork check, which the dry-run table shows (a skip without a kubeconfig, as the
// other checks that read the API).
func TestDryRunConnectivityMatrix(t *testing.T) {
	cleanEnv(t, map[string]string{"HOME": t.TempDir(), "CHECKS": "apiserver", "ENABLE_CONNECTIVITY_MATRIX": "true"})
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"--dry-run"}, &stdout, &stderr, newClient, time.Now())
	assert.Equal(t, exitOK, code, "stderr: %s", stderr.String())
	assert.Regexp(t, `(?m)^podnetwork\s+pods of the cluster DNS Service\s+skip\s.*no kubeconfig`, stdout.String())
	assert.Contains(t, stdout.String(), "0 passed, 0 failed, 0 misconfigured, 2 skipped")
}
