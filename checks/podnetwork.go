package checks

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nodeready/nodeready/internal/envvar"
	"github.com/nodeready/nodeready/internal/kube"
)

var (
	_ Check    = (*PodNetwork)(nil)
	_ Reporter = (*PodNetwork)(nil)
)

// ErrNoPodsElsewhere marks a pod-network check that cannot be checked: the Service has no
// ready endpoint anywhere, or every one is on this node (the first node of a cluster, a
// one-node cluster). No node could pass it then, so it never holds a node, as the
// cluster-DNS bootstrap rule. A Service the check cannot use is a Misconfiguration instead.
var ErrNoPodsElsewhere = fmt.Errorf("%w: cannot be checked: no ready endpoint on another node", ErrSkipped)

// PodNetwork reaches pods on other nodes directly by pod IP: ready endpoints of a Service
// that run on other nodes, one on each of up to Nodes nodes, spread over zones, probed at
// once. No Service address and no kube-proxy rule is on the way, only this node's pod
// network to theirs (the CNI's routes, tunnels and policies), which a node whose CNI agent
// runs and which is Ready may not have yet. Each pod reached gets a don't-fragment ping of
// the route's full size, whose reply is as large: an overlay that drops large packets fails
// here although a small query crosses (see PodProbe.FullSize).
//
// A pod that does not answer is replaced by one on another node: a broken peer is not a
// broken node. Each address family passes when this node reaches at least as many nodes as
// it cannot (and one at least), and a pod in every zone where it probed two nodes or more;
// the peers that did not answer are named in the Report. Where this node cannot tell its
// fault from another's (one other node only, a whole zone silent), the failure is
// Unattributed.
// A family this pod has an address of but the Service lists no pod in (a single-stack
// Service on a dual-stack node) cannot be probed, and the Report says so.
type PodNetwork struct {
	client  kube.Interface
	node    string
	service *DNSService
	probe   PodProbe
	nodes   int

	mu     sync.Mutex
	report Report
}

// PodProbe is how each pod is probed.
type PodProbe struct {
	// DNSName, when set, is asked of each pod (a DNS query over UDP, or TCP to a TCP port):
	// any answer, NXDOMAIN, SERVFAIL and REFUSED included, proves the path. Otherwise each pod
	// gets a TCP connection, or with HTTPPath an HTTP GET that any status answers.
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
	// FullSize proves that packets of the route's full size cross to ip and back, and returns
	// that size; PingFullSize when nil. Where it returns ErrFullSizeNotChecked, a DNS or HTTP
	// probe sends one full TCP segment to the pod instead, which proves the way out only.
	FullSize func(ctx context.Context, ip netip.Addr) (int, error)
}

// NewPodNetwork returns a check, run on node, of the pods of service on up to nodes other
// nodes.
func NewPodNetwork(client kube.Interface, node string, service *DNSService, nodes int, p PodProbe) *PodNetwork {
	if p.Dialer == nil {
		p.Dialer = &net.Dialer{}
	}
	if p.LocalAddrs == nil {
		p.LocalAddrs = net.InterfaceAddrs
	}
	if p.FullSize == nil {
		p.FullSize = PingFullSize
	}
	if p.DNSName != "" && !strings.HasSuffix(p.DNSName, ".") {
		p.DNSName += "." // asked as written: the pod's search list would send several questions
	}
	return &PodNetwork{client: client, node: node, service: service, nodes: max(nodes, 1), probe: p}
}

// Name implements Check.
func (c *PodNetwork) Name() string { return string(NamePodNetwork) }

// Target implements Check.
func (c *PodNetwork) Target() string {
	return fmt.Sprintf("pods of %s on up to %d other nodes", c.service, c.nodes)
}

// Report implements Reporter: the pods the last passing run reached, with the sizes proven
// there, what it could not prove, and the peers that did not answer.
func (c *PodNetwork) Report() Report {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Report{Reached: slices.Clone(c.report.Reached), NotProven: slices.Clone(c.report.NotProven), Unreachable: slices.Clone(c.report.Unreachable)}
}

// Run implements Check.
func (c *PodNetwork) Run(ctx context.Context) error {
	svc, err := c.service.Get(ctx)
	if err != nil {
		return err
	}
	list, err := c.client.DiscoveryV1().EndpointSlices(svc.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector:   labels.Set{discoveryv1.LabelServiceName: svc.Name}.String(),
		ResourceVersion: "0", // the watch cache: see Endpoints.Run
	})
	if err != nil {
		return fmt.Errorf("list EndpointSlices of %s: %w", svc, apiError(err))
	}
	ts, err := c.findTargets(svc.String(), list.Items)
	if err != nil {
		return err
	}
	var report Report
	var errs []error
	ownFault := false
	for _, family := range families {
		candidates := ts.of(family)
		if len(candidates) == 0 {
			if c.hasGlobal(family) {
				report.NotProven = append(report.NotProven, fmt.Sprintf("%s: %s lists no %s address of a pod on another node, and this pod has one",
					family, svc, family))
			}
			continue
		}
		attributed, err := c.probeFamily(ctx, candidates, &report)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", family, err))
			ownFault = ownFault || attributed
		}
	}
	if err := errors.Join(errs...); err != nil {
		if !ownFault {
			// Nothing this node saw tells its fault from its peers'. One family that is
			// this node's fault makes the whole failure its own.
			return Unattributed(err)
		}
		return err
	}
	c.mu.Lock()
	c.report = report
	c.mu.Unlock()
	return nil
}

// families are the address families, in the order they are told.
var families = []string{"IPv4", "IPv6"}

// probeFamily probes the pods of one family: the first c.nodes in this agent's order, and as
// many more as there are spares (up to c.nodes), at once. Once one has answered, the others
// have straggle to answer too: a healthy pod answers in milliseconds. The family passes
// when the pods reached are at least as many as those that did not answer, and one at
// least, and when in every zone where pods of two nodes or more were probed one at least
// was reached: then those that did not answer are peers at fault, named in the report.
// Otherwise the error names them, and attributed says whether the failure is this node's:
// it is not when the one other node there is to probe does not answer (a broken peer and a
// broken node look the same from here), nor when a whole zone does not while the others do
// (that zone's outage, or this node's way to it: nothing here tells which).
func (c *PodNetwork) probeFamily(ctx context.Context, candidates []podTarget, report *Report) (attributed bool, err error) {
	candidates = candidates[:min(len(candidates), 2*c.nodes)]
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan int, len(candidates))
	outcomes := make([]outcome, len(candidates))
	for i, t := range candidates {
		go func() {
			var o outcome
			defer func() {
				if p := recover(); p != nil { // Execute recovers the check's own goroutine only
					o = outcome{err: fmt.Errorf("panic: %v\n%s", p, debug.Stack())}
				}
				outcomes[i] = o
				done <- i
			}()
			o = c.probeTarget(ctx, t)
			if o.err != nil && errors.Is(context.Cause(ctx), errLate) {
				o.err = context.Cause(ctx) // cut short once enough pods answered: that is why
			}
		}()
	}
	reached, decided := 0, 0
	var late <-chan time.Time
	for decided < len(candidates) {
		select {
		case i := <-done:
			decided++
			if outcomes[i].err == nil {
				reached++
			}
			if reached == 1 {
				late = time.After(straggle)
			}
		case <-late:
			cancel(fmt.Errorf("%w within %s while %d other pods answered", errLate, straggle, reached))
			late = nil
		}
	}
	var ok, failed []string
	notProven := map[string][]string{} // what was not proven, and why -> the pods
	for i, o := range outcomes {
		t := candidates[i]
		switch {
		case o.err != nil:
			failed = append(failed, fmt.Sprintf("%s: %v", t, o.err))
		case o.both > 0:
			ok = append(ok, fmt.Sprintf("%s, %d-byte packets both ways", t, o.both))
			if o.notProven != "" {
				notProven["packets of the route's MTU: "+o.notProven] = append(notProven["packets of the route's MTU: "+o.notProven], t.String())
			}
		case o.out > 0:
			ok = append(ok, fmt.Sprintf("%s, %d-byte packets out", t, o.out))
			notProven["full-size packets back: "+o.notProven] = append(notProven["full-size packets back: "+o.notProven], t.String())
		default:
			ok = append(ok, t.String())
			notProven["full-size packets: "+o.notProven] = append(notProven["full-size packets: "+o.notProven], t.String())
		}
	}
	slices.Sort(ok)
	slices.Sort(failed)
	if len(ok) == 0 || len(failed) > len(ok) {
		err := fmt.Errorf("this node reaches %d of %d pods on other nodes: %s", len(ok), len(candidates), strings.Join(failed, "; "))
		if len(candidates) == 1 {
			return false, fmt.Errorf("%w (the only other node with a pod to probe: whether it or this node is at fault cannot be told from here)", err)
		}
		return true, err
	}
	if err := unreachedZone(candidates, outcomes, len(ok)); err != nil {
		return false, err
	}
	for _, what := range slices.Sorted(maps.Keys(notProven)) {
		kind, why, _ := strings.Cut(what, ": ")
		report.NotProven = append(report.NotProven, fmt.Sprintf("%s with %s: %s", kind, strings.Join(notProven[what], ", "), why))
	}
	report.Reached = append(report.Reached, ok...)
	report.Unreachable = append(report.Unreachable, failed...)
	return false, nil
}

// unreachedZone is the error of the first zone, in name order, where pods of two nodes or
// more were probed and none was reached; nil when there is none. One pod of a zone that does
// not answer is one broken peer, as elsewhere; two or more, all silent while pods of other
// zones answer, are the zone, or this node's way to it, and releasing the node would not
// prove that its pods reach the pods of that zone.
func unreachedZone(candidates []podTarget, outcomes []outcome, reached int) error {
	probed, failed := map[string]int{}, map[string][]string{}
	for i, t := range candidates {
		probed[t.zone]++
		if outcomes[i].err != nil {
			failed[t.zone] = append(failed[t.zone], fmt.Sprintf("%s: %v", t, outcomes[i].err))
		}
	}
	for _, zone := range slices.Sorted(maps.Keys(probed)) {
		if n := probed[zone]; n >= 2 && len(failed[zone]) == n {
			slices.Sort(failed[zone])
			return fmt.Errorf("this node reaches none of the %d pods in zone %s, while it reaches %d in other zones: %s",
				n, zoneName(zone), reached, strings.Join(failed[zone], "; "))
		}
	}
	return nil
}

// zoneName names a zone in a message; pods whose endpoints say no zone are in one.
func zoneName(zone string) string { return cmp.Or(zone, `""`) }

// straggle is how long pods still probed may take to answer once one has: time for a
// full-size ping to be tried again (pingTries, pingWait), so that a slow peer is named for
// what it did, not for being late.
const straggle = 2 * time.Second

// errLate is the error of a pod that had not answered straggle after another had.
var errLate = errors.New("no answer")

// outcome is what probing one pod proved.
type outcome struct {
	err       error  // the pod was not reached, or not with full-size packets
	both      int    // the size of the packets proven both ways, in bytes
	out       int    // else the size of the TCP segments proven from this pod to it
	notProven string // why full size (with both, the route's MTU) was not proven both ways
}

// probeTarget reaches one pod, then proves full size with it: both ways by FullSize, else
// the way out with one full TCP segment.
func (c *PodNetwork) probeTarget(ctx context.Context, t podTarget) outcome {
	if err := c.reach(ctx, t); err != nil {
		return outcome{err: err}
	}
	ip, err := netip.ParseAddr(t.addr)
	if err != nil {
		return outcome{err: err}
	}
	size, err := c.probe.FullSize(ctx, ip)
	switch {
	case err == nil:
		return outcome{both: size}
	case errors.Is(err, ErrPathSmaller):
		// Path-MTU discovery at work (a smaller link on the way, an MTU being changed):
		// the path's size is proven both ways, the route's is not, and neither is a fault.
		return outcome{both: size, notProven: strings.TrimPrefix(err.Error(), ErrPathSmaller.Error()+": ")}
	case errors.Is(err, ErrFullSizeLost):
		return outcome{err: err}
	case !errors.Is(err, ErrFullSizeNotChecked):
		return outcome{notProven: err.Error()} // an error of the probe here, not of the path
	}
	why := strings.TrimPrefix(err.Error(), ErrFullSizeNotChecked.Error()+": ")
	out, serr := c.segment(ctx, t)
	switch {
	case errors.Is(serr, errNoSegment):
		return outcome{notProven: why}
	case errors.Is(serr, errNoConnection) && t.protocol != corev1.ProtocolTCP:
		// The query crossed over UDP; a TCP connection is another protocol, which a network
		// policy may refuse (one that allows UDP/53 only) on every node alike. A connection
		// that opens and then loses the full segment is a lost segment, below.
		return outcome{notProven: fmt.Sprintf("%s; and no TCP connection to send a full segment in (%v)", why, serr)}
	case serr != nil:
		return outcome{err: fmt.Errorf("%w: %w (and no ping: %s)", ErrFullSizeLost, serr, why)}
	}
	return outcome{out: out, notProven: why}
}

// hasGlobal reports whether this pod has a global address of the family. Without its
// addresses it says no.
func (c *PodNetwork) hasGlobal(family string) bool {
	addrs, err := c.probe.LocalAddrs()
	if err != nil {
		return false
	}
	for _, addr := range addrs {
		p, err := netip.ParsePrefix(addr.String())
		if err == nil && p.Addr().IsGlobalUnicast() && familyOf(p.Addr().String()) == family {
			return true
		}
	}
	return false
}

// familyOf is "IPv4" or "IPv6".
func familyOf(addr string) string {
	if a, err := netip.ParseAddr(addr); err == nil && a.Unmap().Is6() {
		return "IPv6"
	}
	return "IPv4"
}

// PodNetworkOptions are the podnetwork check's variables. By default it reaches
// the pods of CLUSTER_DNS_SERVICE, each asked a DNS query.
type PodNetworkOptions struct {
	Service  string `envconfig:"POD_NETWORK_SERVICE" desc:"podnetwork: namespace/name of the Service whose ready pods on other nodes are reached directly by pod IP; empty for CLUSTER_DNS_SERVICE's pods, each asked a DNS query (any answer proves the path)"`
	Port     string `envconfig:"POD_NETWORK_PORT" desc:"podnetwork: the port, by name or number, in the Service's EndpointSlices (a DNS query goes over TCP to a TCP port, such as dns-tcp); empty for the first UDP port of the cluster DNS, else the first TCP port"`
	HTTPPath string `envconfig:"POD_NETWORK_HTTP_PATH" desc:"podnetwork: with POD_NETWORK_SERVICE, GET this path from each pod (any HTTP status is an answer); empty for a TCP connection"`
	Nodes    int    `envconfig:"POD_NETWORK_NODES" default:"3" desc:"podnetwork: how many other nodes to reach a pod on, taken in turn from each zone (topology.kubernetes.io/zone) in an order of each agent's own; as many more are probed at once, to stand in for those that do not answer"`

	// Target and Probe are what Validate read: the Service whose pods are
	// reached (the zero name for the cluster DNS Service, found), and how each
	// is probed.
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
	clusterDNS, find, _ := all.DNS.clusterDNS()
	if clusterDNS.Name == "" && !find && use.Selected {
		return envvar.Required("POD_NETWORK_SERVICE", "CHECKS has podnetwork and CLUSTER_DNS_SERVICE is empty: namespace/name of a Service with pods on other nodes")
	}
	o.Target = clusterDNS // the zero name when it is found
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
func (o *PodNetworkOptions) Checks(all *Options, env Env) []Check {
	svc := NamedDNSService(o.Target)
	if o.Target.Name == "" {
		svc = all.DNS.service(env)
	}
	if env.Client == nil {
		return []Check{Skip(NamePodNetwork, "pods of "+svc.String(), noKubeconfig)}
	}
	return []Check{NewPodNetwork(env.Client, env.Node, svc, o.Nodes, o.Probe)}
}
