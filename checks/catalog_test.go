package checks_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodeready/nodeready/checks"
	"github.com/nodeready/nodeready/internal/envvar"
	"github.com/nodeready/nodeready/internal/kube/adapt"
)

// TestCatalog: every kind is a row, each with options of its own whose variables are
// described and named by no other kind.
func TestCatalog(t *testing.T) {
	assert.Equal(t, []checks.Name{checks.NameDNS, checks.NameTCP, checks.NameHTTP, checks.NameAPIServer, checks.NameClock,
		checks.NameEndpoints, checks.NamePodNetwork, checks.NameNetworkPolicy, checks.NameDaemonSets, checks.NameConditions, checks.NameResources, checks.NameCSI, checks.NameDRA,
		checks.NameCommand}, checks.Names())
	var o checks.Options
	seen := map[any]checks.Name{}
	names := map[string]checks.Name{}
	for _, k := range checks.Catalog {
		opts := k.Options(&o)
		require.NotContains(t, seen, opts, "%s shares its options with %s", k.Name, seen[opts])
		seen[opts] = k.Name
		vars := envvar.Describe(opts)
		assert.NotEmpty(t, vars, k.Name)
		for _, v := range vars {
			assert.NotEmpty(t, v.Description, v.Name)
			assert.NotContains(t, names, v.Name, "%s is read by %s and %s", v.Name, names[v.Name], k.Name)
			names[v.Name] = k.Name
		}
	}
}

// TestBuildWhereNoAPI: without a client (--dry-run and no kubeconfig) or without a node, the
// kinds that need them are skipped checks that say why, one per target; the others run.
func TestBuildWhereNoAPI(t *testing.T) {
	o := checks.Options{
		DNS:        checks.DNSOptions{Domains: envvar.List{"a.example"}},
		APIServer:  checks.APIServerOptions{Probe: checks.APIServerReadyz},
		Endpoints:  checks.EndpointsOptions{Service: "default/kubernetes"},
		Conditions: checks.ConditionsOptions{Conditions: envvar.List{"Ready=True", "NetworkUnavailable=False"}},
		Command:    checks.CommandOptions{Path: "/bin/true"},
	}
	names := []checks.Name{checks.NameDNS, checks.NameAPIServer, checks.NameEndpoints, checks.NameConditions, checks.NameCommand}
	for _, n := range names {
		k, _ := checks.Lookup(n)
		require.NoError(t, k.Options(&o).Validate(&o, checks.Use{Selected: true}), n)
	}
	status := func(env checks.Env) (out []string) {
		for _, r := range checks.RunAll(context.Background(), checks.Build(names, &o, env), time.Second) {
			out = append(out, r.Name+" "+r.Target+" "+r.Status())
		}
		return out
	}
	assert.Equal(t, []string{"dns a.example fail", "apiserver - skip", "endpoints default/kubernetes skip",
		"conditions Ready=True skip", "conditions NetworkUnavailable=False skip", "command /bin/true pass"}, status(checks.Env{}))
	noNode := status(checks.Env{Client: adapt.Clientset(fake.NewClientset())})
	assert.Equal(t, "conditions Ready=True skip", noNode[3], "no NODE_NAME")
}
