package agent

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
		"DNS_TEST_DOMAINS":  "Kubernetes.Default.SVC.cluster.local.,example.com.",
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
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	row := regexp.MustCompile("(?m)^\\| `([A-Z_]+)` \\|\\s*`?([^|`]*?)`?\\s*\\|")
	documented := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(readme), -1) {
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
