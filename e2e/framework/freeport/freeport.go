// Package freeport picks the TCP ports the processes of the tests listen on: the control
// plane's components, Karpenter, and each agent's METRICS_PORT.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync/atomic"
)

// Ports come from below Linux's default ephemeral range (32768-60999). A port from the
// ephemeral range can be taken as the source port of some outgoing connection between the
// check here and the program's bind, and the program would then fail to start for a reason
// no real one has: in a cluster each pod has its own network namespace.
const (
	firstPort = 20000
	lastPort  = 32767
)

// next walks the range from a random start, so that one test binary never hands out the
// same port twice at the same moment and two test binaries rarely do.
var next = func() *atomic.Int32 {
	var p atomic.Int32
	p.Store(rand.Int32N(lastPort - firstPort + 1))
	return &p
}()

// Port returns a port that is free now on every address, as the agent listens on them all
// (a port free on every address is free on loopback too). Another program can still take it
// before the caller binds it.
func Port() (int, error) {
	for range lastPort - firstPort + 1 {
		port := firstPort + int(next.Add(1)-1)%(lastPort-firstPort+1)
		l, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		l.Close()
		return port, nil
	}
	return 0, fmt.Errorf("find free port: none free in %d-%d", firstPort, lastPort)
}

// Ports returns n distinct ports, each as Port does.
func Ports(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		p, err := Port()
		if err != nil {
			return nil, err
		}
		ports = append(ports, p)
	}
	return ports, nil
}
