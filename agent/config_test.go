package agent

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// clearEnv unsets every variable the agent reads, then sets env.
func clearEnv(t *testing.T, env map[string]string) {
	t.Helper()
	for _, v := range Variables() {
		t.Setenv(v.Name, "")
		require.NoError(t, os.Unsetenv(v.Name))
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
}

// defaultConfig is the configuration with every default and NODE_NAME set.
func defaultConfig(t *testing.T) Config {
	t.Helper()
	clearEnv(t, map[string]string{"NODE_NAME": "node-a", "KUBERNETES_SERVICE_HOST": "10.96.0.1"})
	cfg, err := LoadConfig(false)
	require.NoError(t, err)
	return cfg
}

func TestDefaults(t *testing.T) {
	cfg := defaultConfig(t)
	assert.Equal(t, "node-ready/unverified", cfg.TaintKey)
	assert.Equal(t, "NoSchedule", cfg.TaintEffect)
	assert.Equal(t, "node-ready/verified", cfg.VerifiedLabel)
	assert.Equal(t, 300*time.Second, cfg.InitialTimeout)
	assert.Equal(t, 5, cfg.MaxRetries)
	assert.Equal(t, 10*time.Second, cfg.CheckTimeout)
	assert.Equal(t, List{"dns", "tcp", "apiserver", "endpoints"}, cfg.Checks)
	assert.Equal(t, []string{"10.96.0.1:443"}, cfg.TCPAddresses(), "tcp defaults to the API server's service IP")
	ns, name := cfg.EndpointsRef()
	assert.Equal(t, "default/kubernetes", ns+"/"+name)
}

// TestOriginalConfigMap loads the ConfigMap of kube-node-ready's DaemonSet
// mode as it is, through envFrom.
func TestOriginalConfigMap(t *testing.T) {
	clearEnv(t, map[string]string{
		"NODE_NAME":               "ip-10-0-1-100.ec2.internal",
		"KUBERNETES_SERVICE_HOST": "10.100.0.1",
		"INITIAL_TIMEOUT":         "300s",
		"MAX_RETRIES":             "5",
		"RETRY_BACKOFF":           "exponential",
		"DNS_TEST_DOMAINS":        "kubernetes.default.svc.cluster.local,google.com",
		"TAINT_KEY":               "node-ready/unverified",
		"TAINT_VALUE":             "true",
		"TAINT_EFFECT":            "NoSchedule",
		"VERIFIED_LABEL":          "node-ready/verified",
		"VERIFIED_LABEL_VALUE":    "true",
		"ENABLE_METRICS":          "true",
		"METRICS_PORT":            "8080",
		"LOG_LEVEL":               "info",
		"LOG_FORMAT":              "json",
	})
	cfg, err := LoadConfig(false)
	require.NoError(t, err)
	assert.Equal(t, List{"kubernetes.default.svc.cluster.local", "google.com"}, cfg.DNSTestDomains)
}

func TestListDecode(t *testing.T) {
	var l List
	require.NoError(t, l.Decode(" a, b,,c ,"))
	assert.Equal(t, List{"a", "b", "c"}, l)
	require.NoError(t, l.Decode(""))
	assert.Empty(t, l)
}

func TestAcceptedSpellings(t *testing.T) {
	clearEnv(t, map[string]string{
		"NODE_NAME":         "node-a",
		"CHECKS":            "dns, http ,tcp",
		"DNS_TEST_DOMAINS":  "Kubernetes.Default.SVC.cluster.local.,example.com.,10.96.0.10,fd00::10",
		"TCP_TARGETS":       "[fd00::1]:443,db.example:5432",
		"HTTP_URLS":         "https://example.com/healthz,http://10.0.0.1:8080/",
		"ENDPOINTS_SERVICE": "kubernetes",
	})
	cfg, err := LoadConfig(false)
	require.NoError(t, err)
	ns, name := cfg.EndpointsRef()
	assert.Equal(t, "default/kubernetes", ns+"/"+name, "a bare service name is in default")
	assert.Equal(t, []string{"[fd00::1]:443", "db.example:5432"}, cfg.TCPAddresses())
}

func TestDryRunNeedsNoNodeName(t *testing.T) {
	clearEnv(t, nil)
	_, err := LoadConfig(true)
	require.NoError(t, err)
	_, err = LoadConfig(false)
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "NODE_NAME", ce.Var)
}

// TestREADMEDocumentsEveryVariable keeps the README's configuration table
// and the code in step: every variable with its default, nothing extra.
func TestREADMEDocumentsEveryVariable(t *testing.T) {
	row := regexp.MustCompile("(?m)^\\| `([A-Z_]+)` \\|\\s*`?([^|`]*?)`?\\s*\\|")
	documented := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(readmeSection(t, "## Configuration"), -1) {
		documented[m[1]] = strings.TrimSpace(m[2])
	}
	for _, v := range Variables() {
		def, ok := documented[v.Name]
		if assert.True(t, ok, "README does not document %s", v.Name) {
			assert.Equal(t, v.Default, def, "README default of %s", v.Name)
		}
		delete(documented, v.Name)
	}
	assert.Empty(t, documented, "README documents variables the agent does not read")
}

// TestEmptyValueMeansDefault: an empty value of a number, duration, boolean
// or list means its default, as kube-node-ready's urfave/cli flags read it
// (an empty boolean there is false); LOG_LEVEL and LOG_FORMAT, which
// kube-node-ready never used, take their defaults too. An empty value of
// other text is the value, and is refused where it is not allowed.
func TestEmptyValueMeansDefault(t *testing.T) {
	base := map[string]string{"NODE_NAME": "node-a", "KUBERNETES_SERVICE_HOST": "10.96.0.1"}
	tests := []struct {
		name    string
		refused string // empty when the agent starts
		want    func(t *testing.T, c Config)
	}{
		{name: "MAX_RETRIES", want: func(t *testing.T, c Config) { assert.Equal(t, 5, c.MaxRetries) }},
		{name: "INITIAL_TIMEOUT", want: func(t *testing.T, c Config) { assert.Equal(t, 300*time.Second, c.InitialTimeout) }},
		{name: "CHECK_TIMEOUT", want: func(t *testing.T, c Config) { assert.Equal(t, 10*time.Second, c.CheckTimeout) }},
		{name: "METRICS_PORT", want: func(t *testing.T, c Config) { assert.Equal(t, Port(8080), c.MetricsPort) }},
		{name: "DNS_TEST_DOMAINS", want: func(t *testing.T, c Config) {
			assert.Equal(t, List{"kubernetes.default.svc.cluster.local"}, c.DNSTestDomains)
		}},
		{name: "ENABLE_METRICS", want: func(t *testing.T, c Config) {
			assert.False(t, c.EnableMetrics, "kube-node-ready read an empty boolean as false")
		}},
		{name: "DELETE_FAILED_NODE", want: func(t *testing.T, c Config) { assert.Equal(t, KeepTainted, c.FailureAction) }},
		{name: "DRY_RUN"},
		{name: "LOG_LEVEL", want: func(t *testing.T, c Config) { assert.Equal(t, "info", c.LogLevel) }},
		{name: "LOG_FORMAT", want: func(t *testing.T, c Config) { assert.Equal(t, "json", c.LogFormat) }},
		{name: "CLUSTER_DNS_IP"},
		{name: "KLOG_VERBOSITY"},
		{name: "RETRY_BACKOFF_BASE", want: func(t *testing.T, c Config) { assert.Equal(t, time.Second, c.RetryBackoffBase) }},
		{name: "ENDPOINTS_CONNECT", want: func(t *testing.T, c Config) { assert.True(t, c.EndpointsConnect) }},
		{name: "MIN_HOLD_TIME", want: func(t *testing.T, c Config) { assert.Zero(t, c.MinHoldTime) }},
		{name: "CHECKS", want: func(t *testing.T, c Config) { assert.Equal(t, List{"dns", "tcp", "apiserver", "endpoints"}, c.Checks) }},
		{name: "RETRY_BACKOFF", refused: "RETRY_BACKOFF"}, // as in kube-node-ready, which stopped too
		{name: "TAINT_KEY", refused: "TAINT_KEY"},
		{name: "TAINT_EFFECT", refused: "TAINT_EFFECT"},
		{name: "VERIFIED_LABEL", refused: "VERIFIED_LABEL"},
		{name: "KUBERNETES_SERVICE_PORT", refused: "KUBERNETES_SERVICE_PORT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t, base)
			t.Setenv(tt.name, "")

			cfg, err := LoadConfig(false)

			if tt.refused != "" {
				var ce *ConfigError
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, tt.refused, ce.Var)
				return
			}
			require.NoError(t, err)
			if tt.want != nil {
				tt.want(t, cfg)
			}
		})
	}
}

// TestLogSettingsOfKubeNodeReady: kube-node-ready logged through klog and
// never used LOG_LEVEL or LOG_FORMAT, so it ran with any value. nodeready
// takes the spellings people wrote for them and refuses the rest by name.
func TestLogSettingsOfKubeNodeReady(t *testing.T) {
	tests := []struct {
		env           map[string]string
		level, format string
		refused       string
	}{
		{env: map[string]string{"LOG_LEVEL": "INFO"}, level: "info", format: "json"},
		{env: map[string]string{"LOG_LEVEL": "Debug"}, level: "debug", format: "json"},
		{env: map[string]string{"LOG_LEVEL": "warning"}, level: "warn", format: "json"},
		{env: map[string]string{"LOG_FORMAT": "text"}, level: "info", format: "console"},
		{env: map[string]string{"LOG_FORMAT": "JSON"}, level: "info", format: "json"},
		{env: map[string]string{"LOG_FORMAT": "Console"}, level: "info", format: "console"},
		{env: map[string]string{"LOG_LEVEL": "verbose"}, refused: "LOG_LEVEL"},
		{env: map[string]string{"LOG_FORMAT": "logfmt"}, refused: "LOG_FORMAT"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.env), func(t *testing.T) {
			clearEnv(t, map[string]string{"NODE_NAME": "node-a", "KUBERNETES_SERVICE_HOST": "10.96.0.1"})
			for k, v := range tt.env {
				t.Setenv(k, v)
			}

			cfg, err := LoadConfig(false)

			if tt.refused != "" {
				var ce *ConfigError
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, tt.refused, ce.Var)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.level, cfg.LogLevel)
			assert.Equal(t, tt.format, cfg.LogFormat)
		})
	}
}

// TestUnimplementedKubeNodeReadyVariablesAreRefused: a variable that
// kube-node-ready read and nodeready has no use for is accepted only where it
// had no effect, and otherwise stops the agent with what to write instead.
func TestUnimplementedKubeNodeReadyVariablesAreRefused(t *testing.T) {
	tests := []struct {
		name, value string
		refused     bool
		instead     string // part of the message
	}{
		{"CLUSTER_DNS_IP", "10.96.0.10", true, "DNS_NAMESERVER=10.96.0.10:53"},
		{"CLUSTER_DNS_IP", "fd00::a", true, "DNS_NAMESERVER=[fd00::a]:53"},
		{"KLOG_VERBOSITY", "2", true, "LOG_LEVEL=debug"},
		{"KLOG_VERBOSITY", "lots", true, "whole number"},
		{"KLOG_VERBOSITY", "0", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			clearEnv(t, map[string]string{"NODE_NAME": "node-a", "KUBERNETES_SERVICE_HOST": "10.96.0.1", tt.name: tt.value})

			_, err := LoadConfig(false)

			if !tt.refused {
				require.NoError(t, err)
				return
			}
			var ce *ConfigError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tt.name, ce.Var)
			assert.Contains(t, ce.Error(), tt.instead)
		})
	}
}

// TestExtraTaints: EXTRA_TAINTS in the kubelet's key[=value]:effect form adds startup taints
// after TAINT_KEY's; a malformed one, or one naming a taint twice, stops the agent naming
// the variable.
func TestExtraTaints(t *testing.T) {
	base := map[string]string{"NODE_NAME": "node-a", "KUBERNETES_SERVICE_HOST": "10.96.0.1"}
	clearEnv(t, base)
	t.Setenv("EXTRA_TAINTS", "readiness.k8s.io/nodeready=true:NoSchedule, startup-taint.cluster-autoscaler.kubernetes.io/nodeready:NoExecute")
	cfg, err := LoadConfig(false)
	require.NoError(t, err)
	taints, err := cfg.StartupTaints()
	require.NoError(t, err)
	assert.Equal(t, []corev1.Taint{
		{Key: "node-ready/unverified", Value: "true", Effect: corev1.TaintEffectNoSchedule},
		{Key: "readiness.k8s.io/nodeready", Value: "true", Effect: corev1.TaintEffectNoSchedule},
		{Key: "startup-taint.cluster-autoscaler.kubernetes.io/nodeready", Effect: corev1.TaintEffectNoExecute},
	}, taints)

	for value, says := range map[string]string{
		"readiness.k8s.io/nodeready":                "key[=value]:effect",
		"readiness.k8s.io/nodeready:Sometimes":      "effect",
		"-bad-/key:NoSchedule":                      "taint key",
		"readiness.k8s.io/x=a b:NoSchedule":         "taint value",
		"node-ready/unverified=other:NoSchedule":    "named twice",
		"a.io/x:NoSchedule,a.io/x=again:NoSchedule": "named twice",
	} {
		t.Run(value, func(t *testing.T) {
			clearEnv(t, base)
			t.Setenv("EXTRA_TAINTS", value)
			_, err := LoadConfig(false)
			var ce *ConfigError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, "EXTRA_TAINTS", ce.Var)
			assert.Contains(t, ce.Error(), says)
		})
	}
}

// TestTaintOwner: TAINT_OWNER is nodeready or external; with external, the settings that
// would write the taint another controller owns stop the agent naming the variable.
func TestTaintOwner(t *testing.T) {
	assert.Equal(t, TaintOwnerNodeready, defaultConfig(t).TaintOwner)
	base := map[string]string{"NODE_NAME": "node-a", "KUBERNETES_SERVICE_HOST": "10.96.0.1", "TAINT_OWNER": "external"}
	clearEnv(t, base)
	cfg, err := LoadConfig(false)
	require.NoError(t, err)
	assert.True(t, cfg.ExternalTaint())

	for _, tt := range []struct{ name, value, refused string }{
		{"TAINT_OWNER", "nrc", "TAINT_OWNER"},
		{"EXTRA_TAINTS", "readiness.k8s.io/x:NoSchedule", "EXTRA_TAINTS"},
		{"REVERIFY_TAINT", "true", "REVERIFY_TAINT"},
		{"FAILURE_ACTION", "fail-open", "FAILURE_ACTION"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t, base)
			t.Setenv(tt.name, tt.value)
			_, err := LoadConfig(false)
			var ce *ConfigError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tt.refused, ce.Var)
		})
	}
	clearEnv(t, base)
	t.Setenv("FAILURE_ACTION", "replace-node")
	_, err = LoadConfig(false)
	assert.NoError(t, err, "replace-node acts only on a node that still carries TAINT_KEY's taint, whoever owns it")
}
