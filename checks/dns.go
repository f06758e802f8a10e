package checks

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeready/nodeready/internal/envvar"
)

var _ Check = (*DNS)(nil)

// DNS resolves one name and passes when the name yields at least one address.
//
// The name goes to the resolver as written. DNS compares names
// case-insensitively, so "Kubernetes.Default.SVC" resolves like its lower-case
// form. A trailing dot marks a fully qualified name: the resolver asks for
// exactly that name and skips the search list from resolv.conf, which tests
// the name without depending on the pod's search domains and ndots. Without
// the dot, a name with fewer dots than ndots is tried with each search domain
// first, as any program in the pod would.
type DNS struct {
	name     string
	resolver *net.Resolver
}

// NewDNS returns a check that resolves name with r (net.DefaultResolver when
// nil; see NewResolver).
func NewDNS(name string, r *net.Resolver) *DNS {
	if r == nil {
		r = net.DefaultResolver
	}
	return &DNS{name: name, resolver: r}
}

// Name implements Check.
func (c *DNS) Name() string { return string(NameDNS) }

// Target implements Check.
func (c *DNS) Target() string { return c.name }

// Run implements Check.
func (c *DNS) Run(ctx context.Context) error {
	addrs, err := c.resolver.LookupHost(ctx, c.name)
	if err != nil {
		return fmt.Errorf("resolve %q: %w", c.name, err)
	}
	if len(addrs) == 0 {
		return fmt.Errorf("resolve %q: no addresses", c.name)
	}
	return nil
}

// NewResolver returns the resolver for DNS checks. An empty nameserver means
// the system configuration (resolv.conf, which in a pod is the cluster DNS).
// Otherwise nameserver is a "host:port" that receives every query, over UDP or
// TCP as the resolver asks (TCP after a truncated UDP answer), while the
// search list, ndots and /etc/hosts still come from the system configuration.
// A lookup error then names the resolv.conf server, because the Go resolver
// reports the address it meant to dial, not the one Dial chose. Either way a
// query over UDP that gets no answer soon is sent again (hedgedDialer).
func NewResolver(nameserver string) *net.Resolver {
	var d net.Dialer
	dial := d.DialContext
	if nameserver != "" {
		dial = func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, nameserver)
		}
	}
	return NewResolverWith(dial)
}

// NewResolverWith is NewResolver dialing each socket with dial: tests stand for kube-proxy
// with it.
func NewResolverWith(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: hedgedDialer{dial: dial}.DialContext}
}

// DNSOptions are the dns check's variables. CLUSTER_DNS_SERVICE is the cluster
// DNS Service, which the podnetwork check reaches the pods of by default.
type DNSOptions struct {
	Domains    envvar.List `envconfig:"DNS_TEST_DOMAINS" default:"kubernetes.default.svc.cluster.local" desc:"dns: names that must resolve"`
	Nameserver string      `envconfig:"DNS_NAMESERVER" desc:"dns: host:port of the nameserver to ask; empty for the pod's resolv.conf"`
	ClusterDNS string      `envconfig:"CLUSTER_DNS_SERVICE" default:"auto" desc:"dns: namespace/name of the cluster DNS Service; while its EndpointSlices have no ready endpoint anywhere, a failing dns check is reported as not checkable instead of holding the node (no node could pass it, and DNS pods may need a released node to run on); auto finds it whatever its name, from the nameserver of the pod's resolv.conf; empty turns this off"`

	// ClusterDNSService is CLUSTER_DNS_SERVICE as Validate read it; the zero
	// value when it is empty or auto (FindClusterDNS).
	ClusterDNSService types.NamespacedName `ignored:"true"`
	// Find is whether the Service is found (CLUSTER_DNS_SERVICE=auto).
	Find bool `ignored:"true"`

	found *DNSService // the one DNSService of the checks built with one client
}

// Validate implements KindOptions.
func (o *DNSOptions) Validate(_ *Options, use Use) error {
	if use.Selected {
		if len(o.Domains) == 0 {
			return envvar.Required("DNS_TEST_DOMAINS", "CHECKS has dns: a comma-separated list of names")
		}
		for _, d := range o.Domains {
			// An IP address "resolves" to itself, as it did in kube-node-ready
			// (README: Coming from kube-node-ready); IPv6 too.
			if _, err := netip.ParseAddr(d); err == nil {
				continue
			}
			// DNS is case-insensitive and a trailing dot only marks the
			// name as absolute, so both are accepted.
			if err := envvar.DNSName("DNS_TEST_DOMAINS", strings.TrimSuffix(strings.ToLower(d), ".")); err != nil {
				err.Value = d
				return err
			}
		}
	}
	if o.Nameserver != "" {
		if err := envvar.HostPort("DNS_NAMESERVER", o.Nameserver); err != nil {
			return err
		}
	}
	var err error
	o.ClusterDNSService, o.Find, err = o.clusterDNS()
	return err
}

// clusterDNS is CLUSTER_DNS_SERVICE, a bare name in kube-system; the zero
// value when it is empty or auto, and then find says whether it is found.
func (o *DNSOptions) clusterDNS() (nn types.NamespacedName, find bool, err error) {
	switch o.ClusterDNS {
	case "":
		return nn, false, nil
	case FindClusterDNS:
		return nn, true, nil
	}
	nn, err = envvar.Service("CLUSTER_DNS_SERVICE", o.ClusterDNS, "kube-system", "kube-system/kube-dns, auto to find it, or leave it empty")
	return nn, false, err
}

// service is the cluster DNS Service of the checks built with env, nil when
// CLUSTER_DNS_SERVICE is empty: one for all of them, so it is found once.
func (o *DNSOptions) service(env Env) *DNSService {
	switch {
	case o.found != nil && o.found.client == env.Client:
	case o.ClusterDNSService.Name != "":
		o.found = NamedDNSService(o.ClusterDNSService)
	case o.Find:
		o.found = FindDNSService(env.Client, resolvConf)
	}
	return o.found
}

// resolvConf is where the kubelet writes the pod's nameservers.
const resolvConf = "/etc/resolv.conf"

// Checks implements KindOptions: one check per name.
func (o *DNSOptions) Checks(_ *Options, env Env) []Check {
	resolver := NewResolver(o.Nameserver)
	svc := o.service(env)
	var list []Check
	for _, d := range o.Domains {
		var dns Check = NewDNS(d, resolver)
		if svc != nil && env.Client != nil {
			dns = NewUnlessNoClusterDNS(dns, env.Client, svc)
		}
		list = append(list, dns)
	}
	return list
}
