package config_test

import (
	"bytes"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nodeready/nodeready/internal/config"
	"github.com/nodeready/nodeready/internal/config/configtest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeready/nodeready/checks"
)

func TestDefaults(t *testing.T) {
	cfg := defaultConfig(t)
	assert.Equal(t, "node-ready/unverified", cfg.StartupTaints[0].Key)
	assert.Equal(t, corev1.TaintEffectNoSchedule, cfg.StartupTaints[0].Effect)
	assert.Equal(t, "node-ready/verified", cfg.VerifiedLabel)
	assert.Equal(t, 300*time.Second, cfg.InitialTimeout)
	assert.Equal(t, 5, cfg.MaxRetries)
	assert.Equal(t, 10*time.Second, cfg.CheckTimeout)
	assert.Equal(t, []checks.Name{checks.NameDNS, checks.NameTCP, checks.NameAPIServer, checks.NameClock, checks.NameEndpoints}, cfg.Checks)
	assert.Equal(t, []string{"10.96.0.1:443"}, cfg.Options.TCP.Addresses, "tcp defaults to the API server's service IP")
	assert.Equal(t, "default/kubernetes", cfg.Options.Endpoints.Target.String())
	assert.True(t, cfg.Options.DNS.Find, "the cluster DNS Service found (CLUSTER_DNS_SERVICE=auto)")
	assert.Equal(t, "2xx", cfg.Options.HTTP.Expect.String())
	assert.NotNil(t, cfg.Options.HTTP.Client)
	assert.True(t, cfg.Options.DaemonSets.Selection.Empty())
	assert.Equal(t, 8080, int(cfg.MetricsPort))
}

// TestOriginalConfigMap loads the ConfigMap of kube-node-ready's DaemonSet
// mode as it is, through envFrom.
func TestOriginalConfigMap(t *testing.T) {
	cfg, err := load(t, map[string]string{
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
	}, false)
	require.NoError(t, err)
	assert.Equal(t, []string{"kubernetes.default.svc.cluster.local", "google.com"}, []string(cfg.Options.DNS.Domains))
}

func TestAcceptedSpellings(t *testing.T) {
	cfg, err := load(t, map[string]string{
		"NODE_NAME":         "node-a",
		"CHECKS":            "dns, http ,tcp",
		"DNS_TEST_DOMAINS":  "Kubernetes.Default.SVC.cluster.local.,example.com.,10.96.0.10,fd00::10",
		"TCP_TARGETS":       "[fd00::1]:443,db.example:5432",
		"HTTP_URLS":         "https://example.com/healthz,http://10.0.0.1:8080/",
		"ENDPOINTS_SERVICE": "kubernetes",
	}, false)
	require.NoError(t, err)
	assert.Equal(t, "default/kubernetes", cfg.Options.Endpoints.Target.String(), "a bare service name is in default")
	assert.Equal(t, []string{"[fd00::1]:443", "db.example:5432"}, cfg.Options.TCP.Addresses)
	assert.Equal(t, []checks.Name{checks.NameDNS, checks.NameHTTP, checks.NameTCP}, cfg.Checks)
}

func TestDryRunNeedsNoNodeName(t *testing.T) {
	_, err := load(t, nil, true)
	require.NoError(t, err)
	_, err = load(t, nil, false)
	requireRefused(t, err, "NODE_NAME")
}

// TestREADMEDocumentsEveryVariable keeps the configuration reference's table
// (docs/configuration.md) and the code in step: every variable with its
// default, nothing extra.
func TestREADMEDocumentsEveryVariable(t *testing.T) {
	row := regexp.MustCompile("(?m)^\\| `([A-Z_]+)` \\|\\s*`?([^|`]*?)`?\\s*\\|")
	documented := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(readmeSection(t, "## Variables"), -1) {
		documented[m[1]] = strings.TrimSpace(m[2])
	}
	for _, v := range config.Variables() {
		def, ok := documented[v.Name]
		if assert.True(t, ok, "docs/configuration.md does not document %s", v.Name) {
			assert.Equal(t, v.Default, def, "docs/configuration.md default of %s", v.Name)
		}
		delete(documented, v.Name)
	}
	assert.Empty(t, documented, "docs/configuration.md documents variables the agent does not read")
}

// TestEmptyValueMeansDefault: an empty value of a number, duration, boolean
// or list means its default, as kube-node-ready's urfave/cli flags read it
// (an empty boolean there is false); LOG_LEVEL and LOG_FORMAT, which
// kube-node-ready never used, take their defaults too. An empty value of
// other text is the value, and is refused where it is not allowed.
func TestEmptyValueMeansDefault(t *testing.T) {
	tests := []struct {
		name    string
		refused string // empty when the agent starts
		want    func(t *testing.T, c config.Config)
	}{
		{name: "MAX_RETRIES", want: func(t *testing.T, c config.Config) { assert.Equal(t, 5, c.MaxRetries) }},
		{name: "INITIAL_TIMEOUT", want: func(t *testing.T, c config.Config) { assert.Equal(t, 300*time.Second, c.InitialTimeout) }},
		{name: "CHECK_TIMEOUT", want: func(t *testing.T, c config.Config) { assert.Equal(t, 10*time.Second, c.CheckTimeout) }},
		{name: "METRICS_PORT", want: func(t *testing.T, c config.Config) { assert.Equal(t, 8080, int(c.MetricsPort)) }},
		{name: "DNS_TEST_DOMAINS", want: func(t *testing.T, c config.Config) {
			assert.Equal(t, []string{"kubernetes.default.svc.cluster.local"}, []string(c.Options.DNS.Domains))
		}},
		{name: "ENABLE_METRICS", want: func(t *testing.T, c config.Config) {
			assert.False(t, c.EnableMetrics, "kube-node-ready read an empty boolean as false")
		}},
		{name: "DELETE_FAILED_NODE", want: func(t *testing.T, c config.Config) { assert.Equal(t, config.KeepTainted, c.FailureAction) }},
		{name: "DRY_RUN"},
		{name: "LOG_LEVEL", want: func(t *testing.T, c config.Config) { assert.Equal(t, "info", c.LogLevel) }},
		{name: "LOG_FORMAT", want: func(t *testing.T, c config.Config) { assert.Equal(t, "json", c.LogFormat) }},
		{name: "CLUSTER_DNS_IP"},
		{name: "KLOG_VERBOSITY"},
		{name: "RETRY_BACKOFF_BASE", want: func(t *testing.T, c config.Config) { assert.Equal(t, time.Second, c.RetryBackoffBase) }},
		{name: "ENDPOINTS_CONNECT", want: func(t *testing.T, c config.Config) { assert.True(t, c.Options.Endpoints.Connect) }},
		{name: "MIN_HOLD_TIME", want: func(t *testing.T, c config.Config) { assert.Zero(t, c.MinHoldTime) }},
		{name: "CHECKS", want: func(t *testing.T, c config.Config) {
			assert.Equal(t, []checks.Name{checks.NameDNS, checks.NameTCP, checks.NameAPIServer, checks.NameClock, checks.NameEndpoints}, c.Checks)
		}},
		{name: "NODE_CONDITIONS", want: func(t *testing.T, c config.Config) {
			assert.Equal(t, []checks.ConditionWant{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}, c.Options.Conditions.Want)
		}},
		{name: "RETRY_BACKOFF", refused: "RETRY_BACKOFF"}, // as in kube-node-ready, which stopped too
		{name: "TAINT_KEY", refused: "TAINT_KEY"},
		{name: "TAINT_EFFECT", refused: "TAINT_EFFECT"},
		{name: "VERIFIED_LABEL", refused: "VERIFIED_LABEL"},
		{name: "KUBERNETES_SERVICE_PORT", refused: "KUBERNETES_SERVICE_PORT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, ok := loadUnlessRefused(t, with(inPod, map[string]string{tt.name: ""}), tt.refused)
			if ok && tt.want != nil {
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
			cfg, ok := loadUnlessRefused(t, with(inPod, tt.env), tt.refused)
			if !ok {
				return
			}
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
			_, err := load(t, with(inPod, map[string]string{tt.name: tt.value}), false)

			if !tt.refused {
				require.NoError(t, err)
				return
			}
			ce := requireRefused(t, err, tt.name)
			assert.Contains(t, ce.Error(), tt.instead)
		})
	}
}

// TestExtraTaints: EXTRA_TAINTS in the kubelet's key[=value]:effect form adds startup taints
// after TAINT_KEY's; a malformed one, or one naming a taint twice, stops the agent naming
// the variable.
func TestExtraTaints(t *testing.T) {
	cfg, err := load(t, with(inPod, map[string]string{
		"EXTRA_TAINTS": "readiness.k8s.io/nodeready=true:NoSchedule, startup-taint.cluster-autoscaler.kubernetes.io/nodeready:NoExecute"}), false)
	require.NoError(t, err)
	assert.Equal(t, []corev1.Taint{
		{Key: "node-ready/unverified", Value: "true", Effect: corev1.TaintEffectNoSchedule},
		{Key: "readiness.k8s.io/nodeready", Value: "true", Effect: corev1.TaintEffectNoSchedule},
		{Key: "startup-taint.cluster-autoscaler.kubernetes.io/nodeready", Effect: corev1.TaintEffectNoExecute},
	}, cfg.StartupTaints)

	for value, says := range map[string]string{
		"readiness.k8s.io/nodeready":                "key[=value]:effect",
		"readiness.k8s.io/nodeready:Sometimes":      "effect",
		"-bad-/key:NoSchedule":                      "taint key",
		"readiness.k8s.io/x=a b:NoSchedule":         "taint value",
		"node-ready/unverified=other:NoSchedule":    "named twice",
		"a.io/x:NoSchedule,a.io/x=again:NoSchedule": "named twice",
	} {
		t.Run(value, func(t *testing.T) {
			_, err := load(t, with(inPod, map[string]string{"EXTRA_TAINTS": value}), false)
			ce := requireRefused(t, err, "EXTRA_TAINTS")
			assert.Contains(t, ce.Error(), says)
		})
	}
}

// TestTaintOwner: TAINT_OWNER is nodeready or external; with external, the settings that
// would write the taint another controller owns stop the agent naming the variable.
func TestTaintOwner(t *testing.T) {
	assert.Equal(t, config.TaintOwnerNodeready, defaultConfig(t).TaintOwner)
	base := with(inPod, map[string]string{"TAINT_OWNER": "external"})
	cfg, err := load(t, base, false)
	require.NoError(t, err)
	assert.True(t, cfg.ExternalTaint())

	for _, tt := range []struct{ name, value, refused string }{
		{"TAINT_OWNER", "nrc", "TAINT_OWNER"},
		{"EXTRA_TAINTS", "readiness.k8s.io/x:NoSchedule", "EXTRA_TAINTS"},
		{"REVERIFY_TAINT", "true", "REVERIFY_TAINT"},
		{"FAILURE_ACTION", "fail-open", "FAILURE_ACTION"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(t, with(base, map[string]string{tt.name: tt.value}), false)
			requireRefused(t, err, tt.refused)
		})
	}
	_, err = load(t, with(base, map[string]string{"FAILURE_ACTION": "replace-node"}), false)
	assert.NoError(t, err, "replace-node acts only on a node that still carries TAINT_KEY's taint, whoever owns it")
}

// TestMetricsPort: `nodeready probe` reads METRICS_PORT as Load does, default and empty
// value included, and no other variable.
func TestMetricsPort(t *testing.T) {
	for _, tt := range []struct {
		env     map[string]string
		port    int
		refused bool
	}{
		{env: nil, port: 8080},
		{env: map[string]string{"METRICS_PORT": ""}, port: 8080},
		{env: map[string]string{"METRICS_PORT": "9090"}, port: 9090},
		{env: map[string]string{"METRICS_PORT": "9090", "CHECKS": "ping", "MAX_RETRIES": "many"}, port: 9090},
		{env: map[string]string{"METRICS_PORT": "010"}, refused: true},
		{env: map[string]string{"METRICS_PORT": "0x1F90"}, refused: true},
		{env: map[string]string{"METRICS_PORT": "65536"}, refused: true},
	} {
		t.Run(fmt.Sprint(tt.env), func(t *testing.T) {
			configtest.Setenv(t, tt.env)
			port, err := config.MetricsPort()
			if tt.refused {
				ce := requireRefused(t, err, "METRICS_PORT")
				assert.Contains(t, ce.Error(), "in decimal without leading zeros")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.port, port)
			if _, set := tt.env["MAX_RETRIES"]; !set {
				cfg, err := load(t, with(inPod, tt.env), false)
				require.NoError(t, err)
				assert.Equal(t, int(cfg.MetricsPort), port, "the agent listens where the probe dials")
			}
		})
	}
}

// TestPrintVariables is the table of `nodeready --help`: every variable with its default.
func TestPrintVariables(t *testing.T) {
	var out bytes.Buffer
	config.PrintVariables(&out)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, len(config.Variables())+1)
	assert.Regexp(t, `^VARIABLE\s+DEFAULT\s+MEANING$`, lines[0])
	for i, v := range config.Variables() {
		assert.True(t, strings.HasPrefix(lines[i+1], v.Name+" "), lines[i+1])
		assert.Contains(t, lines[i+1], v.Default)
	}
}

// TestHTTPCAFileReadOnce: Load reads HTTP_CA_FILE once, and the http checks use what it
// read: the client trusts the file's CA after the file is gone.
func TestHTTPCAFileReadOnce(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600))

	cfg, err := load(t, with(inPod, map[string]string{"CHECKS": "http", "HTTP_URLS": srv.URL, "HTTP_CA_FILE": ca}), false)
	require.NoError(t, err)
	require.NoError(t, os.Remove(ca))

	res := checks.Execute(t.Context(), checks.NewHTTP(srv.URL, cfg.Options.HTTP.Expect, cfg.Options.HTTP.Client), 5*time.Second)
	assert.NoError(t, res.Err, "the client trusts the CA read at load")

	_, err = load(t, with(inPod, map[string]string{"HTTP_CA_FILE": ca}), false)
	requireRefused(t, err, "HTTP_CA_FILE")
}

// TestPodNetwork: the podnetwork check asks the cluster DNS pods a DNS query by default (the
// first name of DNS_TEST_DOMAINS that is not an address), or reaches another Service's pods
// by TCP or HTTP; every bad value stops the agent naming its variable.
func TestPodNetwork(t *testing.T) {
	cfg := defaultConfig(t)
	assert.Equal(t, types.NamespacedName{}, cfg.Options.PodNetwork.Target, "the cluster DNS Service, found")
	assert.Equal(t, checks.PodProbe{DNSName: "kubernetes.default.svc.cluster.local"}, cfg.Options.PodNetwork.Probe)
	assert.Equal(t, 3, cfg.Options.PodNetwork.Nodes)

	cfg, err := load(t, with(inPod, map[string]string{"DNS_TEST_DOMAINS": "1.1.1.1,example.org", "POD_NETWORK_PORT": "dns-tcp"}), false)
	require.NoError(t, err)
	assert.Equal(t, checks.PodProbe{DNSName: "example.org", Port: "dns-tcp"}, cfg.Options.PodNetwork.Probe)

	cfg, err = load(t, with(inPod, map[string]string{"POD_NETWORK_SERVICE": "apps/web", "POD_NETWORK_HTTP_PATH": "/healthz", "POD_NETWORK_NODES": "5"}), false)
	require.NoError(t, err)
	assert.Equal(t, types.NamespacedName{Namespace: "apps", Name: "web"}, cfg.Options.PodNetwork.Target)
	assert.Equal(t, checks.PodProbe{HTTPPath: "/healthz"}, cfg.Options.PodNetwork.Probe)
	assert.Equal(t, 5, cfg.Options.PodNetwork.Nodes)

	for _, tt := range []struct {
		env     map[string]string
		refused string
	}{
		{map[string]string{"POD_NETWORK_NODES": "0"}, "POD_NETWORK_NODES"},
		{map[string]string{"POD_NETWORK_PORT": "70000"}, "POD_NETWORK_PORT"},
		{map[string]string{"POD_NETWORK_PORT": "no such port!"}, "POD_NETWORK_PORT"},
		{map[string]string{"POD_NETWORK_SERVICE": "a/b/c"}, "POD_NETWORK_SERVICE"},
		{map[string]string{"POD_NETWORK_SERVICE": "apps/web", "POD_NETWORK_HTTP_PATH": "healthz"}, "POD_NETWORK_HTTP_PATH"},
		{map[string]string{"POD_NETWORK_HTTP_PATH": "/healthz"}, "POD_NETWORK_HTTP_PATH"},
		{map[string]string{"CHECKS": "podnetwork", "CLUSTER_DNS_SERVICE": ""}, "POD_NETWORK_SERVICE"},
	} {
		t.Run(fmt.Sprint(tt.env), func(t *testing.T) {
			_, err := load(t, with(inPod, tt.env), false)
			requireRefused(t, err, tt.refused)
		})
	}
}

// TestRefusedForTheirHarm: values that work in form but would hurt: a re-verification that
// evicts (a NoExecute startup taint put back on a serving node), a verified label whose
// value says failed open, a request path no request can carry.
func TestRefusedForTheirHarm(t *testing.T) {
	for _, tt := range []struct {
		env     map[string]string
		refused string
	}{
		{map[string]string{"REVERIFY_TAINT": "true", "TAINT_EFFECT": "NoExecute"}, "TAINT_EFFECT"},
		{map[string]string{"REVERIFY_TAINT": "true", "EXTRA_TAINTS": "readiness.k8s.io/x:NoSchedule,example.com/y=1:NoExecute"}, "EXTRA_TAINTS"},
		{map[string]string{"VERIFIED_LABEL_VALUE": "failed-open"}, "VERIFIED_LABEL_VALUE"},
		{map[string]string{"POD_NETWORK_SERVICE": "apps/web", "POD_NETWORK_HTTP_PATH": "/%zz"}, "POD_NETWORK_HTTP_PATH"},
	} {
		t.Run(fmt.Sprint(tt.env), func(t *testing.T) {
			_, err := load(t, with(inPod, tt.env), false)
			requireRefused(t, err, tt.refused)
		})
	}
	for _, env := range []map[string]string{
		{"REVERIFY_TAINT": "true", "TAINT_EFFECT": "NoSchedule", "EXTRA_TAINTS": "readiness.k8s.io/x:PreferNoSchedule"},
		{"REVERIFY_TAINT": "false", "TAINT_EFFECT": "NoExecute"},
		{"POD_NETWORK_SERVICE": "apps/web", "POD_NETWORK_HTTP_PATH": "/healthz?full=1%20x"},
	} {
		_, err := load(t, with(inPod, env), false)
		assert.NoError(t, err, "%v", env)
	}
}
