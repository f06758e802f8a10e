package agent

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
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

// loadConfigMap sets the environment from a ConfigMap in testdata, as
// envFrom would, on top of the chart's DaemonSet environment, and returns
// its data.
func loadConfigMap(t *testing.T, name string) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	var cm corev1.ConfigMap
	require.NoError(t, yaml.Unmarshal(raw, &cm))
	require.NotEmpty(t, cm.Data)
	clearEnv(t, chartDaemonSetEnv)
	for k, v := range cm.Data {
		t.Setenv(k, v)
	}
	return cm.Data
}

// TestKubeNodeReadyConfigMapWorksUnchanged loads ConfigMaps shaped like the
// ones kube-node-ready's Helm chart rendered for its DaemonSet mode, and
// checks that every variable in them is honoured, or refused by name.
func TestKubeNodeReadyConfigMapWorksUnchanged(t *testing.T) {
	tests := []struct {
		file    string
		refused string // the variable the agent stops at; empty when it starts
		want    func(t *testing.T, c Config)
	}{
		{file: "kube-node-ready-default.yaml", want: func(t *testing.T, c Config) {
			assert.Equal(t, "ip-10-0-1-100.ec2.internal", c.NodeName)
			assert.Equal(t, "kube-system", c.PodNamespace)
			assert.Equal(t, 300*time.Second, c.InitialTimeout)
			assert.Equal(t, 10*time.Second, c.CheckTimeout)
			assert.Equal(t, 5, c.MaxRetries)
			assert.Equal(t, "exponential", c.RetryBackoff)
			assert.Equal(t, List{"kubernetes.default.svc.cluster.local", "google.com"}, c.DNSTestDomains)
			assert.Equal(t, []string{"kubernetes.default.svc.cluster.local:443"}, c.TCPAddresses())
			assert.Equal(t, "node-ready/unverified", c.TaintKey)
			assert.Equal(t, "true", c.TaintValue)
			assert.Equal(t, "NoSchedule", c.TaintEffect)
			assert.Equal(t, "node-ready/verified", c.VerifiedLabel)
			assert.Equal(t, "true", c.VerifiedLabelValue)
			assert.Equal(t, KeepTainted, c.FailureAction)
			assert.True(t, c.EnableMetrics)
			assert.Equal(t, Port(8080), c.MetricsPort)
			assert.Equal(t, "info", c.LogLevel)
			assert.Equal(t, "json", c.LogFormat)
		}},
		{file: "kube-node-ready-custom.yaml", want: func(t *testing.T, c Config) {
			assert.Equal(t, 600*time.Second, c.InitialTimeout)
			assert.Equal(t, 10, c.MaxRetries)
			assert.Equal(t, "linear", c.RetryBackoff)
			assert.Equal(t, 5*time.Second, c.RetryBackoffBase, "linear waits kube-node-ready's 5s")
			assert.Equal(t, List{"kubernetes.default.svc.cluster.local", "cloudflare.com", "1.1.1.1"}, c.DNSTestDomains)
			assert.Equal(t, "custom/unverified", c.TaintKey)
			assert.Equal(t, "pending", c.TaintValue)
			assert.Equal(t, "custom/verified", c.VerifiedLabel)
			assert.Equal(t, ReplaceNode, c.FailureAction, "DELETE_FAILED_NODE=true")
			assert.Equal(t, Port(9090), c.MetricsPort)
			assert.Equal(t, "debug", c.LogLevel)
			assert.Equal(t, "console", c.LogFormat)
		}},
		{file: "kube-node-ready-edited.yaml", want: func(t *testing.T, c Config) {
			assert.Equal(t, 300*time.Second, c.InitialTimeout, "empty means the default")
			assert.Equal(t, 5, c.MaxRetries, "empty means the default")
			assert.Equal(t, Port(8080), c.MetricsPort, "empty means the default")
			assert.Equal(t, KeepTainted, c.FailureAction, "an empty DELETE_FAILED_NODE is false")
			assert.Equal(t, "info", c.LogLevel)
			assert.Equal(t, "console", c.LogFormat, "text is console")
			assert.True(t, c.ReadOnly, "DRY_RUN=true")
		}},
		{file: "kube-node-ready-cluster-dns.yaml", refused: "CLUSTER_DNS_IP"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			data := loadConfigMap(t, tt.file)
			known := map[string]bool{}
			for _, v := range KubeNodeReadyVariables {
				known[v.Name] = true
			}
			for k := range data {
				assert.True(t, known[k], "%s is not a kube-node-ready variable nodeready accounts for", k)
			}

			cfg, err := LoadConfig(false)

			if tt.refused != "" {
				var ce *ConfigError
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, tt.refused, ce.Var)
				return
			}
			require.NoError(t, err)
			tt.want(t, cfg)
		})
	}
}

// readmeSection returns the README's text under heading, up to the next
// heading.
func readmeSection(t *testing.T, heading string) string {
	t.Helper()
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(readme), "\n"+heading+"\n")
	require.True(t, ok, "README has no %q", heading)
	if i := strings.Index(section, "\n#"); i >= 0 {
		section = section[:i]
	}
	return section
}

// TestREADMEMatchesKubeNodeReadyVariables keeps the README's table of
// kube-node-ready's variables and KubeNodeReadyVariables in step, row by row.
func TestREADMEMatchesKubeNodeReadyVariables(t *testing.T) {
	row := regexp.MustCompile("(?m)^\\| `([A-Z_]+)` \\| ([a-z]+) \\| (.*) \\|$")
	var documented []KubeNodeReadyVariable
	for _, m := range row.FindAllStringSubmatch(readmeSection(t, "### Coming from kube-node-ready"), -1) {
		documented = append(documented, KubeNodeReadyVariable{Name: m[1], Handling: Handling(m[2]), Note: m[3]})
	}
	assert.Equal(t, KubeNodeReadyVariables, documented)
}

// TestKubeNodeReadyVariablesAreAccountedFor: every variable the list says
// nodeready reads is one it reads, and every refused one is refused by name
// for a value that had an effect in kube-node-ready.
func TestKubeNodeReadyVariablesAreAccountedFor(t *testing.T) {
	read := map[string]bool{"KUBECONFIG": true} // read by main for the client
	for _, v := range Variables() {
		read[v.Name] = true
	}
	effective := map[string]string{"CLUSTER_DNS_IP": "10.96.0.10", "KLOG_VERBOSITY": "4"}
	require.Len(t, KubeNodeReadyVariables, 23, "kube-node-ready's DaemonSet mode read 23 variables")
	for _, v := range KubeNodeReadyVariables {
		t.Run(v.Name, func(t *testing.T) {
			assert.NotEmpty(t, v.Note)
			if v.Handling != Refused {
				assert.True(t, read[v.Name], "nodeready does not read %s", v.Name)
				return
			}
			require.Equal(t, Refused, v.Handling)
			assert.False(t, read[v.Name], "%s is read, not refused", v.Name)
			clearEnv(t, map[string]string{"NODE_NAME": "node-a", "KUBERNETES_SERVICE_HOST": "10.96.0.1", v.Name: effective[v.Name]})
			_, err := LoadConfig(false)
			var ce *ConfigError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, v.Name, ce.Var)
		})
	}
}
