package checks

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/nodeready/nodeready/internal/envvar"
)

var (
	_ Check    = (*PodNetwork)(nil)
	_ Reporter = (*PodNetwork)(nil)
)

// ErrNoPodsElsewhere marks a pod-network check that cannot be checked: the Service has no
// ready endpoint on another node (the first node of a cluster, a one-node cluster). No node
// could pass it then, so it never holds a node, as the cluster-DNS bootstrap rule.
var ErrNoPodsElsewhere = fmt.Errorf("%w: cannot be checked: no ready endpoint on another node", ErrSkipped)

// PodNetwork reaches pods on other nodes directly by pod IP: ready endpoints of a Service
// that run on other nodes, one on each of up to Nodes nodes, spread over zones, probed at
// once. No Service address and no kube-proxy rule is on the way, only this node's pod
// network to theirs (the CNI's routes, tunnels and policies), which a node whose CNI agent
// runs and which is Ready may not have yet. Dual-stack endpoints are probed in each family;
// a family this pod has an address of but the Service lists no pod in (a single-stack Service
// on a dual-stack node) cannot be probed, and a pass says so.
type PodNetwork struct {
	client             kubernetes.Interface
	node               string
	namespace, service string
	probe              PodProbe
	nodes              int

	mu      sync.Mutex
	reached []string // the pods the last pass reached, as "IP on node"
}

// PodProbe is how each pod is probed.
type PodProbe struct {
	// DNSName, when set, is asked of each pod (a DNS query over UDP): any answer, NXDOMAIN
	// included, proves the path. Otherwise each pod gets a TCP connection, or with HTTPPath an
	// HTTP GET that any status answers.
	DNSName  string
	HTTPPath string
	// Port is the port's name or number in the EndpointSlices; empty for the first port of
	// the probe's protocol (UDP for DNS, TCP otherwise).
	Port string
	// Dialer dials every probe; a zero net.Dialer when nil.
	Dialer *net.Dialer
	// LocalAddrs lists this pod's addresses, whose families a pass compares with the
	// Service's; net.InterfaceAddrs when nil.
	LocalAddrs func() ([]net.Addr, error)
}

// NewPodNetwork returns a check, run on node, of the pods of namespace/service on up to
// nodes other nodes.
func NewPodNetwork(client kubernetes.Interface, node, namespace, service string, nodes int, p PodProbe) *PodNetwork {
	if p.Dialer == nil {
		p.Dialer = &net.Dialer{}
	}
	if p.LocalAddrs == nil {
		p.LocalAddrs = net.InterfaceAddrs
	}
	if p.DNSName != "" && !strings.HasSuffix(p.DNSName, ".") {
		p.DNSName += "." // asked as written: the pod's search list would send several questions
	}
	return &PodNetwork{client: client, node: node, namespace: namespace, service: service, nodes: max(nodes, 1), probe: p}
}

// Name implements Check.
func (c *PodNetwork) Name() string { return string(NamePodNetwork) }

// Target implements Check.
func (c *PodNetwork) Target() string {
	return fmt.Sprintf("pods of %s/%s on up to %d other nodes", c.namespace, c.service, c.nodes)
}

// Reached lists the pods the last passing run reached, as "IP on node", and last, when this
// pod has an address of a family the Service lists no pod on another node in, that the
// family was not checked.
func (c *PodNetwork) Reached() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.reached)
}

// podTarget is one pod IP to probe.
type podTarget struct {
	addr, node, zone string
	port             int32
}

func (t podTarget) String() string { return t.addr + " on " + t.node }

// Run implements Check.
func (c *PodNetwork) Run(ctx context.Context) error {
	list, err := c.client.DiscoveryV1().EndpointSlices(c.namespace).List(ctx, metav1.ListOptions{
		LabelSelector:   labels.Set{discoveryv1.LabelServiceName: c.service}.String(),
		ResourceVersion: "0", // the watch cache: see Endpoints.Run
	})
	if err != nil {
		return fmt.Errorf("list EndpointSlices of %s/%s: %w", c.namespace, c.service, apiError(err))
	}
	targets, err := c.choose(list.Items)
	if err != nil {
		return err
	}
	errs := make([]error, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Go(func() { errs[i] = c.reach(ctx, t) })
	}
	wg.Wait()
	var failed []string
	reached := make([]string, 0, len(targets))
	for i, t := range targets {
		if errs[i] != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", t, errs[i]))
		} else {
			reached = append(reached, t.String())
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("cannot reach %d of %d pods of %s/%s on other nodes: %s",
			len(failed), len(targets), c.namespace, c.service, strings.Join(failed, "; "))
	}
	if family := c.unprobedFamily(targets); family != "" {
		reached = append(reached, fmt.Sprintf("%s not checked: %s/%s lists no %s address of a pod on another node, and this pod has one",
			family, c.namespace, c.service, family))
	}
	c.mu.Lock()
	c.reached = reached
	c.mu.Unlock()
	return nil
}

// unprobedFamily returns "IPv4" or "IPv6" when this pod has a global address of that family
// and no target is of it, else "". Without its addresses it says nothing.
func (c *PodNetwork) unprobedFamily(targets []podTarget) string {
	addrs, err := c.probe.LocalAddrs()
	if err != nil {
		return ""
	}
	probed := map[bool]bool{} // is IPv6 -> a target of that family
	for _, t := range targets {
		if a, err := netip.ParseAddr(t.addr); err == nil {
			probed[a.Unmap().Is6()] = true
		}
	}
	for _, addr := range addrs {
		p, err := netip.ParsePrefix(addr.String())
		if err != nil || !p.Addr().IsGlobalUnicast() {
			continue
		}
		if v6 := p.Addr().Unmap().Is6(); !probed[v6] {
			return map[bool]string{false: "IPv4", true: "IPv6"}[v6]
		}
	}
	return ""
}

// choose picks the pods to probe: ready endpoints on other nodes, the nodes taken in turn
// from each zone so that up to c.nodes of them spread over the zones, and on each chosen
// node one endpoint of each address family.
func (c *PodNetwork) choose(items []discoveryv1.EndpointSlice) ([]podTarget, error) {
	byNode := map[string][]podTarget{} // node -> one target per address family
	for i := range items {
		s := &items[i]
		port, ok := c.port(s)
		if !ok {
			continue
		}
		for _, ep := range s.Endpoints {
			if len(ep.Addresses) == 0 || ep.NodeName == nil || *ep.NodeName == c.node ||
				(ep.Conditions.Ready != nil && !*ep.Conditions.Ready) {
				continue
			}
			node := *ep.NodeName
			if slices.ContainsFunc(byNode[node], func(t podTarget) bool { return sameFamily(t.addr, ep.Addresses[0]) }) {
				continue
			}
			byNode[node] = append(byNode[node], podTarget{addr: ep.Addresses[0], node: node, zone: ptr.Deref(ep.Zone, ""), port: port})
		}
	}
	if len(byNode) == 0 {
		return nil, fmt.Errorf("%w (%s/%s, this node %s)", ErrNoPodsElsewhere, c.namespace, c.service, c.node)
	}
	zones := map[string][]string{}
	for node, ts := range byNode {
		zones[ts[0].zone] = append(zones[ts[0].zone], node)
	}
	order := slices.Sorted(func(yield func(string) bool) {
		for z := range zones {
			if !yield(z) {
				return
			}
		}
	})
	for _, z := range order {
		slices.Sort(zones[z])
	}
	var chosen []podTarget
	for n := 0; n < c.nodes && len(order) > 0; {
		for _, z := range slices.Clone(order) {
			if n == c.nodes {
				break
			}
			nodes := zones[z]
			chosen = append(chosen, byNode[nodes[0]]...)
			n++
			if zones[z] = nodes[1:]; len(zones[z]) == 0 {
				order = slices.DeleteFunc(order, func(o string) bool { return o == z })
			}
		}
	}
	slices.SortFunc(chosen, func(a, b podTarget) int { return cmp.Or(cmp.Compare(a.node, b.node), cmp.Compare(a.addr, b.addr)) })
	return chosen, nil
}

// port finds the slice's port for the probe: by name or number when one is set, else the
// first of the probe's protocol.
func (c *PodNetwork) port(s *discoveryv1.EndpointSlice) (int32, bool) {
	protocol := corev1.ProtocolTCP
	if c.probe.DNSName != "" {
		protocol = corev1.ProtocolUDP
	}
	for _, p := range s.Ports {
		if p.Port == nil || cmp.Or(ptr.Deref(p.Protocol, ""), corev1.ProtocolTCP) != protocol {
			continue
		}
		if c.probe.Port == "" || c.probe.Port == ptr.Deref(p.Name, "") || c.probe.Port == strconv.Itoa(int(*p.Port)) {
			return *p.Port, true
		}
	}
	if n, err := strconv.Atoi(c.probe.Port); err == nil && n > 0 && n < 65536 {
		return int32(n), true // a port by number that the slice does not list: a targetPort
	}
	return 0, false
}

// reach probes one pod.
func (c *PodNetwork) reach(ctx context.Context, t podTarget) error {
	addr := net.JoinHostPort(t.addr, strconv.Itoa(int(t.port)))
	switch {
	case c.probe.DNSName != "":
		r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return c.probe.Dialer.DialContext(ctx, network, addr)
		}}
		_, err := r.LookupHost(ctx, c.probe.DNSName)
		if dnsErr := (*net.DNSError)(nil); errors.As(err, &dnsErr) {
			if dnsErr.IsNotFound {
				return nil // an answer: the pod was reached
			}
			// The resolver names the server of the agent's resolv.conf (the cluster DNS
			// Service), which Dial replaced with the pod: name the pod's address.
			dnsErr.Server = addr
		}
		return err
	case c.probe.HTTPPath != "":
		client := &http.Client{Transport: &http.Transport{DialContext: c.probe.Dialer.DialContext, DisableKeepAlives: true}}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+c.probe.HTTPPath, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		return resp.Body.Close()
	default:
		conn, err := dialTCP(ctx, c.probe.Dialer, addr)
		if err != nil {
			return err
		}
		return conn.Close()
	}
}

func sameFamily(a, b string) bool {
	return strings.Contains(a, ":") == strings.Contains(b, ":")
}

// PodNetworkOptions are the podnetwork check's variables. By default it reaches
// the pods of CLUSTER_DNS_SERVICE, each asked a DNS query.
type PodNetworkOptions struct {
	Service  string `envconfig:"POD_NETWORK_SERVICE" desc:"podnetwork: namespace/name of the Service whose ready pods on other nodes are reached directly by pod IP; empty for CLUSTER_DNS_SERVICE's pods, each asked a DNS query (any answer proves the path)"`
	Port     string `envconfig:"POD_NETWORK_PORT" desc:"podnetwork: the port, by name or number, in the Service's EndpointSlices; empty for the first UDP port of the cluster DNS, else the first TCP port"`
	HTTPPath string `envconfig:"POD_NETWORK_HTTP_PATH" desc:"podnetwork: with POD_NETWORK_SERVICE, GET this path from each pod (any HTTP status is an answer); empty for a TCP connection"`
	Nodes    int    `envconfig:"POD_NETWORK_NODES" default:"3" desc:"podnetwork: how many other nodes to reach a pod on, taken in turn from each zone (topology.kubernetes.io/zone)"`

	// Target and Probe are what Validate read: the Service whose pods are
	// reached, and how each is probed.
	Target types.NamespacedName `ignored:"true"`
	Probe  PodProbe             `ignored:"true"`
}

// Validate implements KindOptions. It reads CLUSTER_DNS_SERVICE and
// DNS_TEST_DOMAINS of the dns check, which refuses their bad values.
func (o *PodNetworkOptions) Validate(all *Options, use Use) (err error) {
	if err := envvar.AtLeast("POD_NETWORK_NODES", o.Nodes, 1); err != nil {
		return err
	}
	if p := o.Port; p != "" {
		if n, err := strconv.Atoi(p); (err != nil || n < 1 || n > 65535) && len(validation.IsValidPortName(p)) > 0 {
			return &envvar.Error{Var: "POD_NETWORK_PORT", Value: p, Accepted: "use a port number from 1 to 65535 or a port name of the Service, such as dns-tcp, or leave it empty"}
		}
	}
	if o.HTTPPath != "" {
		if _, err := url.ParseRequestURI(o.HTTPPath); err != nil || !strings.HasPrefix(o.HTTPPath, "/") {
			return &envvar.Error{Var: "POD_NETWORK_HTTP_PATH", Value: o.HTTPPath, Accepted: "must be a request path starting with /, such as /healthz, with any % written as %25, or empty for a TCP connection"}
		}
	}
	o.Probe = PodProbe{Port: o.Port, HTTPPath: o.HTTPPath}
	if o.Service != "" {
		o.Target, err = envvar.Service("POD_NETWORK_SERVICE", o.Service, "default", "kube-system/kube-dns, or leave it empty for CLUSTER_DNS_SERVICE")
		return err
	}
	if o.HTTPPath != "" {
		return &envvar.Error{Var: "POD_NETWORK_HTTP_PATH", Value: o.HTTPPath, Accepted: "applies to the pods of POD_NETWORK_SERVICE; the cluster DNS pods are asked a DNS query: set POD_NETWORK_SERVICE too, or leave it empty"}
	}
	clusterDNS, _ := all.DNS.clusterDNS()
	if clusterDNS.Name == "" && use.Selected {
		return envvar.Required("POD_NETWORK_SERVICE", "CHECKS has podnetwork and CLUSTER_DNS_SERVICE is empty: namespace/name of a Service with pods on other nodes")
	}
	o.Target = clusterDNS
	o.Probe.DNSName = podQueryName
	for _, d := range all.DNS.Domains {
		if _, err := netip.ParseAddr(d); err != nil { // an IP address is no question to ask
			o.Probe.DNSName = d
			break
		}
	}
	return nil
}

// podQueryName is asked of the cluster DNS pods when DNS_TEST_DOMAINS has no name.
const podQueryName = "kubernetes.default.svc.cluster.local"

// Checks implements KindOptions.
func (o *PodNetworkOptions) Checks(_ *Options, env Env) []Check {
	if env.Client == nil {
		return []Check{Skip(NamePodNetwork, o.Target.String(), noKubeconfig)}
	}
	return []Check{NewPodNetwork(env.Client, env.Node, o.Target.Namespace, o.Target.Name, o.Nodes, o.Probe)}
}
