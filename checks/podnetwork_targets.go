package checks

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

// podTarget is one pod IP to probe.
type podTarget struct {
	addr, node, zone string
	port             int32
	protocol         corev1.Protocol
	// segmentPort is the TCP port a full segment can be sent to (PodNetwork.segment), 0 for none.
	segmentPort int32
}

func (t podTarget) String() string { return t.addr + " on " + t.node }

// targets are the pods the check may probe: on each other node, one pod of each address
// family, the nodes in this agent's order (see order).
type targets struct {
	byNode map[string][]podTarget
	order  []string
}

// findTargets reads the Service's EndpointSlices. Whose fault it is that there is nothing
// to probe is decided here: a Service that has no slices, no port the probe can use, or
// ready endpoints that do not say their node is the configuration's (a typo in
// POD_NETWORK_SERVICE or POD_NETWORK_PORT, a DNS Service of another name) and a
// Misconfiguration; no ready endpoint anywhere (the cluster DNS of a new cluster, whose
// nodes are all held: the EndpointSlice controller then keeps one slice with no endpoint
// and no port) or every ready one on this node (the first node) cannot be checked by any
// node, ErrNoPodsElsewhere.
func (c *PodNetwork) findTargets(svc string, items []discoveryv1.EndpointSlice) (targets, error) {
	if len(items) == 0 {
		return targets{}, Misconfiguration(fmt.Errorf("%s has no EndpointSlices: no such Service, or it selects no pod", svc))
	}
	ts := targets{byNode: map[string][]podTarget{}}
	declared, withPort, readyAnywhere, ready, withoutNode := false, false, 0, 0, 0
	for i := range items {
		s := &items[i]
		declared = declared || len(s.Ports) > 0 // the slice of a Service without endpoints lists no port
		readyAnywhere += len(slices.DeleteFunc(slices.Clone(s.Endpoints), unready))
		port, protocol, ok := c.port(s)
		if !ok {
			continue
		}
		withPort = true
		for _, ep := range s.Endpoints {
			if unready(ep) {
				continue
			}
			ready++
			if ep.NodeName == nil || *ep.NodeName == "" {
				withoutNode++
				continue
			}
			node := *ep.NodeName
			if node == c.node || slices.ContainsFunc(ts.byNode[node], func(t podTarget) bool { return familyOf(t.addr) == familyOf(ep.Addresses[0]) }) {
				continue
			}
			ts.byNode[node] = append(ts.byNode[node], podTarget{addr: ep.Addresses[0], node: node, zone: ptr.Deref(ep.Zone, ""),
				port: port, protocol: protocol, segmentPort: c.segmentPort(s, port, protocol)})
		}
	}
	switch {
	case !withPort && (declared || readyAnywhere > 0):
		return targets{}, Misconfiguration(fmt.Errorf("the EndpointSlices of %s have no %s port %s", svc, c.probeProtocol(), cmp.Or(c.probe.Port, "(the first)")))
	case ready == 0:
		return targets{}, fmt.Errorf("%w (%s has no ready endpoint anywhere)", ErrNoPodsElsewhere, svc)
	case withoutNode == ready:
		return targets{}, Misconfiguration(fmt.Errorf("the ready endpoints of %s do not name their node (nodeName), so none can be told to be on another node", svc))
	case len(ts.byNode) == 0:
		return targets{}, fmt.Errorf("%w (%s, this node %s)", ErrNoPodsElsewhere, svc, c.node)
	}
	ts.order = c.order(ts.byNode)
	return ts, nil
}

// unready reports whether an endpoint is no pod to probe: no address, or not ready.
func unready(ep discoveryv1.Endpoint) bool {
	return len(ep.Addresses) == 0 || (ep.Conditions.Ready != nil && !*ep.Conditions.Ready)
}

// of returns the targets of one family ("IPv4" or "IPv6"), one per node, in order.
func (ts targets) of(family string) []podTarget {
	var out []podTarget
	for _, node := range ts.order {
		for _, t := range ts.byNode[node] {
			if familyOf(t.addr) == family {
				out = append(out, t)
			}
		}
	}
	return out
}

// order is the order in which this agent takes the other nodes: one from each zone in
// turn, so that the first ones spread over the zones, and within a zone in an order of
// this node's own (a shuffle seeded by its name), so that the agents of a scale-up spread
// over the nodes instead of all probing the same pods. The order is the same in every
// round of one agent.
func (c *PodNetwork) order(byNode map[string][]podTarget) []string {
	zones := map[string][]string{}
	for node, ts := range byNode {
		zones[ts[0].zone] = append(zones[ts[0].zone], node)
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(c.node))
	shuffle := rand.New(rand.NewPCG(h.Sum64(), 0))
	names := slices.Sorted(func(yield func(string) bool) {
		for z := range zones {
			if !yield(z) {
				return
			}
		}
	})
	for _, z := range names {
		slices.Sort(zones[z])
		shuffle.Shuffle(len(zones[z]), func(i, j int) { zones[z][i], zones[z][j] = zones[z][j], zones[z][i] })
	}
	shuffle.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	var order []string
	for len(names) > 0 {
		for _, z := range slices.Clone(names) {
			order = append(order, zones[z][0])
			if zones[z] = zones[z][1:]; len(zones[z]) == 0 {
				names = slices.DeleteFunc(names, func(n string) bool { return n == z })
			}
		}
	}
	return order
}

// port finds the slice's port for the probe, and its protocol: by name or number when
// POD_NETWORK_PORT sets one, whatever its protocol (a DNS query goes over TCP to a TCP
// port, such as CoreDNS's dns-tcp), else the first of the probe's protocol. A port by
// number that the slice does not list is a targetPort, of the probe's protocol.
func (c *PodNetwork) port(s *discoveryv1.EndpointSlice) (int32, corev1.Protocol, bool) {
	for _, p := range s.Ports {
		if p.Port == nil {
			continue
		}
		protocol := cmp.Or(ptr.Deref(p.Protocol, ""), corev1.ProtocolTCP)
		switch {
		case c.probe.Port == "" && protocol == c.probeProtocol(),
			c.probe.Port != "" && (c.probe.Port == ptr.Deref(p.Name, "") || c.probe.Port == strconv.Itoa(int(*p.Port))):
			if protocol != corev1.ProtocolTCP && c.probe.DNSName == "" || protocol == corev1.ProtocolSCTP {
				continue // a TCP connection or an HTTP GET needs a TCP port
			}
			return *p.Port, protocol, true
		}
	}
	if n, err := strconv.Atoi(c.probe.Port); err == nil && n > 0 && n < 65536 {
		return int32(n), c.probeProtocol(), true
	}
	return 0, "", false
}

// segmentPort is the TCP port of the slice that a full segment can be sent to: the probe's
// own when it is TCP (an HTTP GET, a DNS query over TCP), else for a DNS probe the slice's
// first TCP port (CoreDNS's dns-tcp); 0 for a probe that only connects, which sends nothing.
func (c *PodNetwork) segmentPort(s *discoveryv1.EndpointSlice, port int32, protocol corev1.Protocol) int32 {
	switch {
	case c.probe.DNSName == "" && c.probe.HTTPPath == "":
		return 0
	case protocol == corev1.ProtocolTCP:
		return port
	}
	for _, p := range s.Ports {
		if p.Port != nil && cmp.Or(ptr.Deref(p.Protocol, ""), corev1.ProtocolTCP) == corev1.ProtocolTCP {
			return *p.Port
		}
	}
	return 0
}

// probeProtocol is the protocol the probe takes by default: UDP for a DNS query, TCP
// otherwise.
func (c *PodNetwork) probeProtocol() corev1.Protocol {
	if c.probe.DNSName != "" {
		return corev1.ProtocolUDP
	}
	return corev1.ProtocolTCP
}
