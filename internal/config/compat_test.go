package config_test

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/nodeready/nodeready/checks"
	"github.com/nodeready/nodeready/internal/config"
)

// chartDaemonSetEnv is what the DaemonSet of kube-node-ready's chart set
// besides its ConfigMap (templates/daemonset.yaml): the downward API and a
// service address by name.
var chartDaemonSetEnv = map[string]string{
	"NODE_NAME":               "ip-10-0-1-100.ec2.internal",
	"POD_NAMESPACE":           "kube-system",
	"KUBERNETES_SERVICE_HOST": "kubernetes.default.svc.cluster.local",
	"KUBERNETES_SERVICE_PORT": "443",
}

// loadConfigMap returns the environment of a ConfigMap in testdata, as
// envFrom would set it, on top of the chart's DaemonSet environment, and the
// ConfigMap's data.
func loadConfigMap(t *testing.T, name string) (env, data map[string]string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	var cm corev1.ConfigMap
	require.NoError(t, yaml.Unmarshal(raw, &cm))
	require.NotEmpty(t, cm.Data)
	return with(chartDaemonSetEnv, cm.Data), cm.Data
}

// TestKubeNodeReadyConfigMapWorksUnchanged loads ConfigMaps shaped like the
// ones kube-node-ready's Helm chart rendered for its DaemonSet mode, and
// checks that every variable in them is honoured, or refused by name.
func TestKubeNodeReadyConfigMapWorksUnchanged(t *testing.T) {
	tests := []struct {
		file    string
		refused string // the variable the agent stops at; empty when it starts
		want    func(t *testing.T, c config.Config)
	}{
		{file: "kube-node-ready-default.yaml", want: func(t *testing.T, c config.Config) {
			assert.Equal(t, "ip-10-0-1-100.ec2.internal", c.NodeName)
			assert.Equal(t, "kube-system", c.PodNamespace)
			assert.Equal(t, 300*time.Second, c.InitialTimeout)
			assert.Equal(t, 10*time.Second, c.CheckTimeout)
			assert.Equal(t, 5, c.MaxRetries)
			assert.Equal(t, "exponential", c.RetryBackoff)
			assert.Equal(t, []string{"kubernetes.default.svc.cluster.local", "google.com"}, []string(c.Options.DNS.Domains))
			assert.Equal(t, []string{"kubernetes.default.svc.cluster.local:443"}, c.Options.TCP.Addresses)
			assert.Equal(t, []corev1.Taint{{Key: "node-ready/unverified", Value: "true", Effect: corev1.TaintEffectNoSchedule}}, c.StartupTaints)
			assert.Equal(t, "node-ready/verified", c.VerifiedLabel)
			assert.Equal(t, "true", c.VerifiedLabelValue)
			assert.Equal(t, config.KeepTainted, c.FailureAction)
			assert.True(t, c.EnableMetrics)
			assert.Equal(t, 8080, int(c.MetricsPort))
			assert.Equal(t, "info", c.LogLevel)
			assert.Equal(t, "json", c.LogFormat)
		}},
		{file: "kube-node-ready-custom.yaml", want: func(t *testing.T, c config.Config) {
			assert.Equal(t, 600*time.Second, c.InitialTimeout)
			assert.Equal(t, 10, c.MaxRetries)
			assert.Equal(t, "linear", c.RetryBackoff)
			assert.Equal(t, 5*time.Second, c.RetryBackoffBase, "linear waits kube-node-ready's 5s")
			assert.Equal(t, []string{"kubernetes.default.svc.cluster.local", "cloudflare.com", "1.1.1.1"}, []string(c.Options.DNS.Domains))
			assert.Equal(t, "custom/unverified", c.StartupTaints[0].Key)
			assert.Equal(t, "pending", c.StartupTaints[0].Value)
			assert.Equal(t, "custom/verified", c.VerifiedLabel)
			assert.Equal(t, config.ReplaceNode, c.FailureAction, "DELETE_FAILED_NODE=true")
			assert.Equal(t, 9090, int(c.MetricsPort))
			assert.Equal(t, "debug", c.LogLevel)
			assert.Equal(t, "console", c.LogFormat)
		}},
		{file: "kube-node-ready-edited.yaml", want: func(t *testing.T, c config.Config) {
			assert.Equal(t, 300*time.Second, c.InitialTimeout, "empty means the default")
			assert.Equal(t, 5, c.MaxRetries, "empty means the default")
			assert.Equal(t, 8080, int(c.MetricsPort), "empty means the default")
			assert.Equal(t, config.KeepTainted, c.FailureAction, "an empty DELETE_FAILED_NODE is false")
			assert.Equal(t, "info", c.LogLevel)
			assert.Equal(t, "console", c.LogFormat, "text is console")
			assert.True(t, c.ReadOnly, "DRY_RUN=true")
		}},
		{file: "kube-node-ready-cluster-dns.yaml", refused: "CLUSTER_DNS_IP"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			env, data := loadConfigMap(t, tt.file)
			known := map[string]bool{}
			for _, v := range config.KubeNodeReadyVariables {
				known[v.Name] = true
			}
			for k := range data {
				assert.True(t, known[k], "%s is not a kube-node-ready variable nodeready accounts for", k)
			}

			if cfg, ok := loadUnlessRefused(t, env, tt.refused); ok {
				tt.want(t, cfg)
			}
		})
	}
}

// readmeSection returns the text of the configuration reference,
// docs/configuration.md, under heading, up to the next heading.
func readmeSection(t *testing.T, heading string) string {
	t.Helper()
	readme, err := os.ReadFile("../../docs/configuration.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(readme), "\n"+heading+"\n")
	require.True(t, ok, "docs/configuration.md has no %q", heading)
	if i := strings.Index(section, "\n#"); i >= 0 {
		section = section[:i]
	}
	return section
}

// TestREADMEMatchesKubeNodeReadyVariables keeps the configuration reference's table of
// kube-node-ready's variables and KubeNodeReadyVariables in step, row by row.
func TestREADMEMatchesKubeNodeReadyVariables(t *testing.T) {
	row := regexp.MustCompile("(?m)^\\| `([A-Z_]+)` \\| ([a-z]+) \\| (.*) \\|$")
	var documented []config.KubeNodeReadyVariable
	for _, m := range row.FindAllStringSubmatch(readmeSection(t, "## Coming from kube-node-ready"), -1) {
		documented = append(documented, config.KubeNodeReadyVariable{Name: m[1], Handling: config.Handling(m[2]), Note: m[3]})
	}
	assert.Equal(t, config.KubeNodeReadyVariables, documented)
}

// TestKubeNodeReadyVariablesAreAccountedFor: every variable the list says
// nodeready reads is one it reads, and every refused one is refused by name
// for a value that had an effect in kube-node-ready and accepted for those
// that had none.
func TestKubeNodeReadyVariablesAreAccountedFor(t *testing.T) {
	// KUBECONFIG is read by main for the client; ENABLE_CONNECTIVITY_MATRIX by compat.go
	// (TestConnectivityMatrix).
	read := map[string]bool{"KUBECONFIG": true, "ENABLE_CONNECTIVITY_MATRIX": true}
	for _, v := range config.Variables() {
		read[v.Name] = true
	}
	// The refused variables, each with a value that had an effect in kube-node-ready and
	// the values that had none.
	refusedValues := map[string]struct {
		effective string
		harmless  []string
	}{
		"CLUSTER_DNS_IP": {"10.96.0.10", []string{""}},
		"KLOG_VERBOSITY": {"4", []string{"", "0"}},
	}
	require.Len(t, config.KubeNodeReadyVariables, 24, "kube-node-ready's DaemonSet mode read 23 variables; its configuration reference sets one more")
	var refused []string
	for _, v := range config.KubeNodeReadyVariables {
		t.Run(v.Name, func(t *testing.T) {
			assert.NotEmpty(t, v.Note)
			require.Contains(t, []config.Handling{config.Same, config.Translated, config.Refused}, v.Handling)
			if v.Handling != config.Refused {
				assert.True(t, read[v.Name], "nodeready does not read %s", v.Name)
				return
			}
			refused = append(refused, v.Name)
			assert.False(t, read[v.Name], "%s is read, not refused", v.Name)
			values, ok := refusedValues[v.Name]
			require.True(t, ok, "%s is refused: give it values with and without an effect in kube-node-ready", v.Name)
			_, err := load(t, with(inPod, map[string]string{v.Name: values.effective}), false)
			requireRefused(t, err, v.Name, "%s=%s is accepted", v.Name, values.effective)
			for _, value := range values.harmless {
				_, err := load(t, with(inPod, map[string]string{v.Name: value}), false)
				assert.NoError(t, err, "%s=%q had no effect in kube-node-ready", v.Name, value)
			}
		})
	}
	// The refused branch ran, for each refused variable above.
	assert.ElementsMatch(t, slices.Collect(maps.Keys(refusedValues)), refused)
}

// TestLinearBackoffBelowItsCap: a RETRY_BACKOFF_MAX below kube-node-ready's
// 5s is refused by name rather than shortening the delay silently.
func TestLinearBackoffBelowItsCap(t *testing.T) {
	_, err := load(t, with(inPod, map[string]string{"RETRY_BACKOFF": "linear", "RETRY_BACKOFF_MAX": "3s"}), false)
	ce := requireRefused(t, err, "RETRY_BACKOFF_MAX")
	assert.Contains(t, ce.Accepted, "5s")
}

// TestConnectivityMatrix: ENABLE_CONNECTIVITY_MATRIX, which kube-node-ready's configuration
// reference sets for production ("test pod-to-pod"), turns the podnetwork check on (once,
// after CHECKS); false or empty leaves CHECKS as it is; anything else stops the agent naming
// the variable.
func TestConnectivityMatrix(t *testing.T) {
	for value, want := range map[string][]checks.Name{
		"true":  {checks.NameDNS, checks.NameTCP, checks.NameAPIServer, checks.NameClock, checks.NameEndpoints, checks.NamePodNetwork},
		"TRUE":  {checks.NameDNS, checks.NameTCP, checks.NameAPIServer, checks.NameClock, checks.NameEndpoints, checks.NamePodNetwork},
		"false": {checks.NameDNS, checks.NameTCP, checks.NameAPIServer, checks.NameClock, checks.NameEndpoints},
		"":      {checks.NameDNS, checks.NameTCP, checks.NameAPIServer, checks.NameClock, checks.NameEndpoints},
	} {
		t.Run(value, func(t *testing.T) {
			cfg, err := load(t, with(inPod, map[string]string{"ENABLE_CONNECTIVITY_MATRIX": value}), false)
			require.NoError(t, err)
			assert.Equal(t, want, cfg.Checks)
		})
	}
	cfg, err := load(t, with(inPod, map[string]string{"ENABLE_CONNECTIVITY_MATRIX": "true", "CHECKS": "podnetwork,dns"}), false)
	require.NoError(t, err)
	assert.Equal(t, []checks.Name{checks.NamePodNetwork, checks.NameDNS}, cfg.Checks, "named once")

	_, err = load(t, with(inPod, map[string]string{"ENABLE_CONNECTIVITY_MATRIX": "maybe"}), false)
	requireRefused(t, err, "ENABLE_CONNECTIVITY_MATRIX")
}
