package checks

import (
	"context"
	"fmt"
	"net"
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
// the system resolver (resolv.conf, which in a pod is the cluster DNS).
// Otherwise nameserver is a "host:port" that receives every query, over UDP or
// TCP as the resolver asks (TCP after a truncated UDP answer), while the
// search list, ndots and /etc/hosts still come from the system configuration.
// A lookup error then names the resolv.conf server, because the Go resolver
// reports the address it meant to dial, not the one Dial chose.
func NewResolver(nameserver string) *net.Resolver {
	if nameserver == "" {
		return net.DefaultResolver
	}
	var d net.Dialer
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, nameserver)
		},
	}
}
