package checks

import (
	"context"
	"crypto/tls"
	"fmt"
	"slices"

	"github.com/nodeready/nodeready/internal/kube"
)

// Options holds the options of every kind of check, one field per kind. Each
// field's struct defines the kind's environment variables in its tags (read by
// internal/config through envvar) and refuses what the kind cannot run with.
type Options struct {
	DNS           DNSOptions
	TCP           TCPOptions
	HTTP          HTTPOptions
	APIServer     APIServerOptions
	Clock         ClockOptions
	Endpoints     EndpointsOptions
	PodNetwork    PodNetworkOptions
	NetworkPolicy NetworkPolicyOptions
	DaemonSets    DaemonSetsOptions
	Conditions    ConditionsOptions
	Resources     ResourcesOptions
	CSI           CSIOptions
	DRA           DRAOptions
	Command       CommandOptions
}

// Env is where the checks run: what a kind needs beyond its options.
type Env struct {
	// Client reaches the API server; nil in --dry-run without a kubeconfig,
	// where the checks that need it are skipped and say why.
	Client kube.Interface
	// Node is the node the checks run for (NODE_NAME); empty in --dry-run
	// without it.
	Node string
	// VerifiedLabel and VerifiedLabelValue are the label a release adds, which
	// the daemonsets gate leaves out of a DaemonSet's placement.
	VerifiedLabel, VerifiedLabelValue string
	// APIServer is the API server as Client reaches it; its Addr is empty in
	// --dry-run.
	APIServer APIServerEndpoint
	// FleetPassed tells whether another node of the agent's configuration was
	// verified lately (the fleet's evidence); nil without a client.
	FleetPassed func(ctx context.Context) (bool, error)
}

// APIServerEndpoint is the API server as the agent's client reaches it.
type APIServerEndpoint struct {
	// Addr is its host:port.
	Addr string
	// TLS is the client's TLS configuration (the cluster's CA, the server name);
	// nil when the client speaks plain HTTP.
	TLS *tls.Config
}

// Use is how a kind is used: whether CHECKS names it, and whether the agent
// runs --dry-run, where a target may be unknown.
type Use struct{ Selected, DryRun bool }

// KindOptions is the options of one kind of check.
type KindOptions interface {
	// Validate refuses, as an *envvar.Error that names the variable, a value
	// the kind cannot run with, and parses the values its checks use. A
	// kind's values are checked whether or not CHECKS names it, so a mistake
	// shows before the kind is turned on; what the kind needs only
	// to run is required only when use.Selected. all holds the other kinds'
	// options as read, for the values kinds share.
	Validate(all *Options, use Use) error
	// Checks builds the kind's checks, one per target, from validated options.
	Checks(all *Options, env Env) []Check
}

// Kind is one row of the catalog: a kind of check and where its options are.
type Kind struct {
	Name Name
	// Gate: a check of the node's own readiness beyond the network.
	Gate    bool
	Options func(o *Options) KindOptions
}

// Catalog lists every kind of check, in the order of `nodeready --help`.
// Adding a check is a file with the check and its options, and a row here.
var Catalog = []Kind{
	{Name: NameDNS, Options: func(o *Options) KindOptions { return &o.DNS }},
	{Name: NameTCP, Options: func(o *Options) KindOptions { return &o.TCP }},
	{Name: NameHTTP, Options: func(o *Options) KindOptions { return &o.HTTP }},
	{Name: NameAPIServer, Options: func(o *Options) KindOptions { return &o.APIServer }},
	{Name: NameClock, Options: func(o *Options) KindOptions { return &o.Clock }},
	{Name: NameEndpoints, Options: func(o *Options) KindOptions { return &o.Endpoints }},
	{Name: NamePodNetwork, Options: func(o *Options) KindOptions { return &o.PodNetwork }},
	{Name: NameNetworkPolicy, Options: func(o *Options) KindOptions { return &o.NetworkPolicy }},
	{Name: NameDaemonSets, Gate: true, Options: func(o *Options) KindOptions { return &o.DaemonSets }},
	{Name: NameConditions, Gate: true, Options: func(o *Options) KindOptions { return &o.Conditions }},
	{Name: NameResources, Gate: true, Options: func(o *Options) KindOptions { return &o.Resources }},
	{Name: NameCSI, Gate: true, Options: func(o *Options) KindOptions { return &o.CSI }},
	{Name: NameDRA, Gate: true, Options: func(o *Options) KindOptions { return &o.DRA }},
	{Name: NameCommand, Gate: true, Options: func(o *Options) KindOptions { return &o.Command }},
}

// Names lists the names of the catalog's kinds, as CHECKS accepts them.
func Names() []Name {
	names := make([]Name, len(Catalog))
	for i, k := range Catalog {
		names[i] = k.Name
	}
	return names
}

// Lookup returns the kind named name.
func Lookup(name Name) (Kind, bool) {
	i := slices.IndexFunc(Catalog, func(k Kind) bool { return k.Name == name })
	if i < 0 {
		return Kind{}, false
	}
	return Catalog[i], true
}

// Build turns validated options into the checks of the kinds named, one per
// target, in the order of names. A check that cannot run where it is (no
// kubeconfig in --dry-run, no target known) becomes a skipped check that says
// why, so the dry-run table shows it instead of hiding it.
func Build(names []Name, o *Options, env Env) []Check {
	var list []Check
	for _, name := range names {
		k, ok := Lookup(name)
		if !ok {
			panic(fmt.Sprintf("checks: no kind %q in the catalog", name)) // config refuses such a name
		}
		list = append(list, k.Options(o).Checks(o, env)...)
	}
	return list
}

// skipped is a check that cannot run here; it reports the reason as a skip.
type skipped struct {
	name           Name
	target, reason string
}

// Skip returns a check of kind name and target that does not run, for reason.
func Skip(name Name, target, reason string) Check { return skipped{name, target, reason} }

func (s skipped) Name() string   { return string(s.name) }
func (s skipped) Target() string { return s.target }
func (s skipped) Run(context.Context) error {
	return fmt.Errorf("%w: %s", ErrSkipped, s.reason)
}

// Why no API check can run in env: no client or no node, or "".
func (e Env) noAPI() string {
	switch {
	case e.Client == nil:
		return noKubeconfig
	case e.Node == "":
		return "NODE_NAME is not set"
	}
	return ""
}

const noKubeconfig = "no kubeconfig: set KUBECONFIG or create ~/.kube/config"

// perTarget builds one check per target with build, or, when why is set, one
// skipped check per target.
func perTarget[T any](name Name, targets []T, why string, target func(T) string, build func(T) Check) []Check {
	var list []Check
	for _, t := range targets {
		if why != "" {
			list = append(list, Skip(name, target(t), why))
			continue
		}
		list = append(list, build(t))
	}
	return list
}
