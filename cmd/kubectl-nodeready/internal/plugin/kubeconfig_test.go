package plugin

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// TestKubeconfigFlagsAreKubectls: the plugin's connection flags are kubectl's, those of
// cli-runtime's ConfigFlags: the same names, shorthands, types, defaults and help.
func TestKubeconfigFlagsAreKubectls(t *testing.T) {
	want := pflag.NewFlagSet("kubectl", pflag.ContinueOnError)
	genericclioptions.NewConfigFlags(true).AddFlags(want)
	got := pflag.NewFlagSet("plugin", pflag.ContinueOnError)
	newKubeconfigFlags().addFlags(got)

	assert.Equal(t, flagTable(want), flagTable(got))
}

// TestKubeconfigFlagsConnectAsKubectl: the same kubeconfig and flags make the same
// connection as ConfigFlags makes: server, TLS, credentials, impersonation, timeout.
func TestKubeconfigFlagsConnectAsKubectl(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "config")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters:
- {name: prod, cluster: {server: "https://prod.example.com:6443", certificate-authority-data: "`+testCA+`"}}
- {name: staging, cluster: {server: "https://staging.example.com", insecure-skip-tls-verify: true}}
users:
- {name: ops, user: {token: prod-token}}
- {name: ci, user: {username: ci, password: secret}}
contexts:
- {name: prod, context: {cluster: prod, user: ops, namespace: team-a}}
- {name: staging, context: {cluster: staging, user: ci}}
current-context: prod
`), 0o600))

	for _, args := range [][]string{
		{},
		{"--context", "staging"},
		{"--context", "staging", "--cluster", "prod", "--user", "ops", "-n", "team-b"},
		{"-s", "https://10.0.0.1:6443", "--token", "flag-token", "--insecure-skip-tls-verify"},
		{"--server", "https://10.0.0.1", "--tls-server-name", "api.internal", "--request-timeout", "5s", "--disable-compression"},
		{"--as", "system:serviceaccount:kube-system:nodeready", "--as-group", "a", "--as-group", "b", "--as-uid", "42",
			"--as-user-extra", "scopes=view", "--as-user-extra", "scopes=edit", "--as-user-extra", "malformed"},
		{"--context", "staging", "--token", "t"},
		{"--context", "missing"},
		{"--client-certificate", "/tmp/cert.pem", "--client-key", "/tmp/key.pem", "--certificate-authority", "/tmp/ca.pem"},
	} {
		t.Run(args2name(args), func(t *testing.T) {
			kubectl := genericclioptions.NewConfigFlags(true)
			fs := pflag.NewFlagSet("kubectl", pflag.ContinueOnError)
			kubectl.AddFlags(fs)
			require.NoError(t, fs.Parse(append([]string{"--kubeconfig", kubeconfig}, args...)))
			want, wantErr := kubectl.ToRESTConfig()
			wantNS, _, _ := kubectl.ToRawKubeConfigLoader().Namespace()

			plugin := newKubeconfigFlags()
			fs = pflag.NewFlagSet("plugin", pflag.ContinueOnError)
			plugin.addFlags(fs)
			require.NoError(t, fs.Parse(append([]string{"--kubeconfig", kubeconfig}, args...)))
			got, gotErr := plugin.restConfig()
			gotNS, _, _ := plugin.loader().Namespace()

			assert.Equal(t, wantErr, gotErr)
			assert.Equal(t, wantNS, gotNS)
			if want == nil || got == nil {
				assert.Equal(t, want, got)
				return
			}
			// Functions (the exec plugin's, the proxy's) compare by pointer: compare the rest.
			want.Proxy, got.Proxy = nil, nil
			assert.Equal(t, want.String(), got.String())
			assert.Equal(t, want.Impersonate, got.Impersonate)
			assert.Equal(t, want.BearerToken, got.BearerToken)
			assert.Equal(t, want.TLSClientConfig, got.TLSClientConfig)
			assert.Equal(t, want.Timeout, got.Timeout)
			assert.Equal(t, want.DisableCompression, got.DisableCompression)
		})
	}
}

func args2name(args []string) string {
	if len(args) == 0 {
		return "kubeconfig alone"
	}
	name := ""
	for _, a := range args {
		if len(a) > 1 && a[0] == '-' {
			name += a + " "
		}
	}
	return name
}

// testCA is certificate-authority-data: the loader copies its bytes, it parses no certificate.
const testCA = "YSBjZXJ0aWZpY2F0ZSBhdXRob3JpdHkncyBQRU0="

// TestKubeconfigMissing: without a kubeconfig the plugin does what kubectl does (client-go's
// default, http://localhost:8080).
func TestKubeconfigMissing(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("KUBECONFIG", filepath.Join(dir, "none"))
	t.Setenv("HOME", dir)
	want, wantErr := genericclioptions.NewConfigFlags(true).ToRESTConfig()
	got, gotErr := newKubeconfigFlags().restConfig()
	require.NoError(t, wantErr)
	require.NoError(t, gotErr)
	assert.Equal(t, want.String(), got.String())
}

// flagTable is each flag of fs by name: its shorthand, type, default and help.
func flagTable(fs *pflag.FlagSet) map[string][4]string {
	flags := map[string][4]string{}
	fs.VisitAll(func(f *pflag.Flag) { flags[f.Name] = [4]string{f.Shorthand, f.Value.Type(), f.DefValue, f.Usage} })
	return flags
}
