package checks

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeready/nodeready/internal/envvar"
	"github.com/nodeready/nodeready/internal/kube"
)

var _ Check = (*NetworkPolicy)(nil)

// networkPolicyBlockWait is how long the blocked connection may go unanswered
// before it counts as blocked: an engine that drops (Calico, Cilium) leaves the
// dial waiting, one that rejects (kube-router) refuses it at once. The allowed
// connection of the same round, to the API server, answers within a round trip,
// so a silence of this long is the policy, not the path.
const networkPolicyBlockWait = 2 * time.Second

// networkPolicyProgramWait is how long the connection the canary policy blocks
// may keep opening before the policy counts as not in force here. An engine
// programs a new pod's rules once it sees the pod, moments after the pod starts
// (kube-router about a second after the agent's start on the e2e's joining
// nodes), so the agent's first probe often comes before its own rules do. Tried
// again within the check, every networkPolicyRetry, the round passes as soon as
// the rules are in, rather than failing and waiting for the next round.
const (
	networkPolicyProgramWait = 3 * time.Second
	networkPolicyRetry       = 200 * time.Millisecond
)

// NetworkPolicy passes when a NetworkPolicy is in force on this node, proven by
// a connection the canary policy must block and one it must let through, both
// from the agent's pod, in the same run:
//
//   - allowed: a new TCP connection to the API server, as the agent's client
//     reaches it. It shows that this pod's egress works, so that a dead network
//     is not taken for enforcement;
//   - blocked: a new TCP connection to this node's kubelet (its InternalIP and
//     the port of the Node's daemonEndpoints), which answers on every registered
//     node. The canary policy selects the agent's pods for Egress and allows
//     every pod and every other address and port, but not TCP to the kubelet's
//     port outside the pod network. Egress from a pod is enforced on the node it
//     runs on, and the connection leaves the pod's network namespace (a pod's
//     connection to its own address never does, and proves nothing).
//
// A connection to the kubelet that is refused, unreachable or unanswered for
// networkPolicyBlockWait is blocked; one that opens means the policy is not in
// force here. That is the node's fault when another node of the configuration
// passed (the engine runs, and not yet or no longer here), and the cluster's
// when none did (no engine, or one that enforces nowhere): a Misconfiguration.
// A canary policy that is missing, selects no Egress, or would itself allow the
// kubelet's port or block the API server is a Misconfiguration too.
type NetworkPolicy struct {
	client kube.Interface
	node   string
	canary types.NamespacedName
	// apiServer is the API server as the agent reaches it.
	apiServer APIServerEndpoint
	// enforced says whether a node of this configuration passed; nil when
	// unknown (--dry-run), when a failure here is the node's.
	enforced func(ctx context.Context) (bool, error)
	dialer   *net.Dialer
	wait     time.Duration
	// program: how long a connection that opens is tried again
	// (networkPolicyProgramWait).
	program time.Duration
}

// NewNetworkPolicy returns a check, run on node, of the canary NetworkPolicy
// canary. apiServer is where the allowed connection goes; enforced, when not
// nil, says whether another node of the configuration passed the check.
func NewNetworkPolicy(client kube.Interface, node string, canary types.NamespacedName, apiServer APIServerEndpoint,
	enforced func(ctx context.Context) (bool, error)) *NetworkPolicy {
	return &NetworkPolicy{client: client, node: node, canary: canary, apiServer: apiServer, enforced: enforced,
		dialer: &net.Dialer{}, wait: networkPolicyBlockWait, program: networkPolicyProgramWait}
}

// Name implements Check.
func (c *NetworkPolicy) Name() string { return string(NameNetworkPolicy) }

// Target implements Check.
func (c *NetworkPolicy) Target() string { return "networkpolicy/" + c.canary.String() }

// Run implements Check.
func (c *NetworkPolicy) Run(ctx context.Context) error {
	policy, err := c.client.NetworkingV1().NetworkPolicies(c.canary.Namespace).Get(ctx, c.canary.Name,
		metav1.GetOptions{ResourceVersion: "0"})
	if apierrors.IsNotFound(err) {
		return Misconfiguration(fmt.Errorf("canary NetworkPolicy %s not found: install it with the check (manifests/networkpolicy/)", c.canary))
	}
	if err != nil {
		return fmt.Errorf("get NetworkPolicy %s: %w", c.canary, apiError(err))
	}
	node, err := c.client.CoreV1().Nodes().Get(ctx, c.node, metav1.GetOptions{ResourceVersion: "0"})
	if err != nil {
		return fmt.Errorf("get node %s: %w", c.node, apiError(err))
	}
	kubelet, err := kubeletAddr(node)
	if err != nil {
		return Misconfiguration(err)
	}
	if err := canaryBlocks(policy, kubelet, c.apiServer.Addr); err != nil {
		return Misconfiguration(fmt.Errorf("canary NetworkPolicy %s: %w", c.canary, err))
	}

	// The allowed connection first: without it a blocked one proves nothing.
	if err := c.reachAPIServer(ctx); err != nil {
		return fmt.Errorf("connect to the API server at %s, which the canary policy allows: %w", c.apiServer.Addr, err)
	}

	// A connection that opens is tried again for a moment: the engine may not have
	// programmed this new pod yet (networkPolicyProgramWait).
	until := time.Now().Add(c.program)
	opened, err := c.probeKubelet(ctx, kubelet)
retry:
	for opened && err == nil && time.Now().Before(until) {
		select {
		case <-ctx.Done():
			break retry // the check's time ran out: the last connection opened
		case <-time.After(networkPolicyRetry):
		}
		again, perr := c.probeKubelet(ctx, kubelet)
		if perr != nil && ctx.Err() != nil {
			break retry
		}
		opened, err = again, perr
	}
	if err != nil || !opened {
		return err
	}
	notEnforced := fmt.Errorf("NetworkPolicy not in force on this node: connected to the kubelet at %s, which the canary policy %s blocks", kubelet, c.canary)
	if c.enforced == nil {
		return notEnforced
	}
	ok, err := c.enforced(ctx)
	switch {
	case err != nil:
		return Unattributed(fmt.Errorf("%w (could not read whether another node enforces it: %w)", notEnforced, err))
	case !ok:
		return Misconfiguration(fmt.Errorf("%w, and no node of this configuration passed: is a NetworkPolicy engine running, and does it enforce egress?", notEnforced))
	}
	return notEnforced
}

// reachAPIServer opens a new connection to the API server and, over TLS, completes
// the handshake as the agent's client would before it closes the connection. A
// connection closed before its handshake is an error to the API server's TLS
// server: it counts it in apiserver_tls_handshake_errors_total, a series that
// clusters alert on to find broken certificates, and logs it at -v=5.
func (c *NetworkPolicy) reachAPIServer(ctx context.Context) error {
	conn, err := c.dialer.DialContext(ctx, "tcp", c.apiServer.Addr)
	if err != nil || c.apiServer.TLS == nil {
		if err == nil {
			err = conn.Close()
		}
		return err
	}
	cfg := c.apiServer.TLS.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(c.apiServer.Addr)
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = conn.Close()
		return fmt.Errorf("TLS handshake: %w", err)
	}
	return tc.Close()
}

// probeKubelet connects to the kubelet at kubelet, which the canary policy
// blocks: opened reports a connection that opened; a blocked one is neither
// opened nor an error.
func (c *NetworkPolicy) probeKubelet(ctx context.Context, kubelet netip.AddrPort) (opened bool, err error) {
	dial, cancel := context.WithTimeout(ctx, c.wait)
	defer cancel()
	conn, err := c.dialer.DialContext(dial, "tcp", kubelet.String())
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err() // the check's own time ran out, not the wait for a block
		}
		if blocked(err) {
			return false, nil
		}
		return false, fmt.Errorf("connect to the kubelet at %s, which the canary policy blocks: %w", kubelet, err)
	}
	_ = conn.Close()
	return true, nil
}

// blocked tells whether a failed dial is a policy's answer: a reject (an ICMP
// port or host unreachable, or a reset) or a drop (no answer in time).
func blocked(err error) bool {
	var timeout interface{ Timeout() bool }
	return errors.Is(err, context.DeadlineExceeded) ||
		(errors.As(err, &timeout) && timeout.Timeout()) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) ||
		errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM)
}

// kubeletAddr is the address of node's kubelet: its first InternalIP and the
// port it serves (daemonEndpoints, 10250 when the kubelet has not said).
func kubeletAddr(node *corev1.Node) (netip.AddrPort, error) {
	port := uint16(10250)
	if p := node.Status.DaemonEndpoints.KubeletEndpoint.Port; p > 0 && p < 65536 {
		port = uint16(p)
	}
	for _, a := range node.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		if ip, err := netip.ParseAddr(a.Address); err == nil {
			return netip.AddrPortFrom(ip.Unmap(), port), nil
		}
	}
	return netip.AddrPort{}, fmt.Errorf("node %s lists no InternalIP: the kubelet, which the canary policy blocks, cannot be reached", node.Name)
}

// canaryBlocks says why policy cannot be the canary: it must select Egress,
// allow none of its rules TCP to kubelet, and allow TCP to apiServer (host:port,
// a literal address; a name is not checked). Peers by pod or namespace selector
// never match either address: neither is a pod's (the pods of the host's
// network are not the policy's pods).
func canaryBlocks(policy *networkingv1.NetworkPolicy, kubelet netip.AddrPort, apiServer string) error {
	egress := false
	for _, t := range policy.Spec.PolicyTypes {
		egress = egress || t == networkingv1.PolicyTypeEgress
	}
	if !egress {
		return errors.New("its policyTypes have no Egress, so it blocks no connection of the agent's")
	}
	if allows(policy, kubelet) {
		return fmt.Errorf("it allows TCP to the kubelet at %s, the connection it must block", kubelet)
	}
	host, port, err := net.SplitHostPort(apiServer)
	if err != nil {
		return nil
	}
	ip, err1 := netip.ParseAddr(host)
	p, err2 := strconv.ParseUint(port, 10, 16)
	if err1 == nil && err2 == nil && !allows(policy, netip.AddrPortFrom(ip.Unmap(), uint16(p))) {
		return fmt.Errorf("it blocks TCP to the API server at %s, which the agent needs", apiServer)
	}
	return nil
}

// allows tells whether one of policy's egress rules allows TCP to to, an
// address outside the pod network.
func allows(policy *networkingv1.NetworkPolicy, to netip.AddrPort) bool {
	for _, rule := range policy.Spec.Egress {
		if peerMatches(rule.To, to.Addr()) && portMatches(rule.Ports, to.Port()) {
			return true
		}
	}
	return false
}

func peerMatches(peers []networkingv1.NetworkPolicyPeer, ip netip.Addr) bool {
	if len(peers) == 0 {
		return true
	}
	for _, p := range peers {
		if p.IPBlock == nil {
			continue
		}
		if prefix, err := netip.ParsePrefix(p.IPBlock.CIDR); err != nil || !prefix.Contains(ip) {
			continue
		}
		excepted := false
		for _, e := range p.IPBlock.Except {
			if prefix, err := netip.ParsePrefix(e); err == nil && prefix.Contains(ip) {
				excepted = true
			}
		}
		if !excepted {
			return true
		}
	}
	return false
}

func portMatches(ports []networkingv1.NetworkPolicyPort, port uint16) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		if p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP {
			continue
		}
		switch {
		case p.Port == nil:
			return true
		case p.Port.Type != 0: // a named port is a pod's: never an address outside the pod network
			continue
		case p.EndPort == nil && int32(port) == p.Port.IntVal,
			p.EndPort != nil && int32(port) >= p.Port.IntVal && int32(port) <= *p.EndPort:
			return true
		}
	}
	return false
}

// NetworkPolicyOptions are the networkpolicy check's variables.
type NetworkPolicyOptions struct {
	Canary string `envconfig:"NETWORKPOLICY_CANARY" default:"kube-system/nodeready-canary" desc:"networkpolicy: namespace/name of the canary NetworkPolicy that selects the agent's pods for Egress and blocks only TCP to the kubelet's port outside the pod network (manifests/networkpolicy/ installs it)"`

	// Target is what Validate read.
	Target types.NamespacedName `ignored:"true"`
}

// Validate implements KindOptions.
func (o *NetworkPolicyOptions) Validate(_ *Options, _ Use) (err error) {
	o.Target, err = envvar.Service("NETWORKPOLICY_CANARY", o.Canary, "kube-system", "kube-system/nodeready-canary")
	if err != nil {
		var e *envvar.Error
		if errors.As(err, &e) {
			e.Accepted = "use namespace/name of a NetworkPolicy, such as kube-system/nodeready-canary"
		}
	}
	return err
}

// Checks implements KindOptions.
func (o *NetworkPolicyOptions) Checks(_ *Options, env Env) []Check {
	why := env.noAPI()
	if why == "" && env.APIServer.Addr == "" {
		// --dry-run: the canary policy selects the agent's pods, not this process.
		why = "runs in the agent's pod only, which the canary policy selects"
	}
	if why != "" {
		return []Check{Skip(NameNetworkPolicy, "networkpolicy/"+o.Target.String(), why)}
	}
	return []Check{NewNetworkPolicy(env.Client, env.Node, o.Target, env.APIServer, env.FleetPassed)}
}
