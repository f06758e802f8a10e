package plugin

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/homedir"
)

// kubeconfigFlags are kubectl's flags of which cluster to reach and as whom (--kubeconfig,
// --context, -n, --as, ...), with the names, shorthands, defaults and help of cli-runtime's
// ConfigFlags (TestKubeconfigFlagsAreKubectls), bound as client-go's clientcmd binds them.
// ConfigFlags itself is not used: its package brings kustomize and client-go's discovery,
// which registers every API group, into the plugin for each platform of the release.
type kubeconfigFlags struct {
	explicitPath string
	overrides    clientcmd.ConfigOverrides
	// userExtra is --as-user-extra, key=value pairs.
	userExtra []string
	// cacheDir is --cache-dir, accepted as kubectl accepts it; the plugin caches nothing.
	cacheDir string
}

func newKubeconfigFlags() *kubeconfigFlags {
	return &kubeconfigFlags{overrides: clientcmd.ConfigOverrides{ClusterDefaults: clientcmd.ClusterDefaults}}
}

// addFlags registers the flags on fs.
func (f *kubeconfigFlags) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.explicitPath, "kubeconfig", "", "Path to the kubeconfig file to use for CLI requests.")
	fs.StringVar(&f.cacheDir, "cache-dir", defaultCacheDir(), "Default cache directory")
	names := clientcmd.RecommendedConfigOverrideFlags("")
	names.AuthOverrideFlags.Impersonate.Description = "Username to impersonate for the operation. User could be a regular user or a service account in a namespace."
	names.AuthOverrideFlags.ImpersonateUID.Description = "UID to impersonate for the operation."
	names.ClusterOverrideFlags.APIServer.ShortName = "s"
	names.ClusterOverrideFlags.TLSServerName.Description = "Server name to use for server certificate validation. If it is not provided, the hostname used to contact the server is used"
	// Not flags of kubectl's: basic authentication's (its kubeconfig entries still work) and
	// the proxy's.
	names.AuthOverrideFlags.Username.LongName = ""
	names.AuthOverrideFlags.Password.LongName = ""
	names.ClusterOverrideFlags.ProxyURL.LongName = ""
	clientcmd.BindOverrideFlags(&f.overrides, fs, names)
	fs.StringArrayVar(&f.userExtra, "as-user-extra", nil, "User extras to impersonate for the operation, this flag can be repeated to specify multiple values for the same key.")
}

// loader is the kubeconfig as the flags amend it.
func (f *kubeconfigFlags) loader() clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.DefaultClientConfig = &clientcmd.DefaultClientConfig
	rules.ExplicitPath = f.explicitPath
	overrides := f.overrides
	if len(f.userExtra) > 0 {
		overrides.AuthInfo.ImpersonateUserExtra = map[string][]string{}
		for _, extra := range f.userExtra {
			if key, value, ok := strings.Cut(extra, "="); ok {
				overrides.AuthInfo.ImpersonateUserExtra[key] = append(overrides.AuthInfo.ImpersonateUserExtra[key], value)
			}
		}
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &overrides)
}

// restConfig is the connection the flags and the kubeconfig describe. Without a kubeconfig
// it is client-go's default, http://localhost:8080, as kubectl's (ClusterDefaults).
func (f *kubeconfigFlags) restConfig() (*rest.Config, error) { return f.loader().ClientConfig() }

// defaultCacheDir is kubectl's: $KUBECACHEDIR, else ~/.kube/cache.
func defaultCacheDir() string {
	if dir := os.Getenv("KUBECACHEDIR"); dir != "" {
		return dir
	}
	return filepath.Join(homedir.HomeDir(), ".kube", "cache")
}
