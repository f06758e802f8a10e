package controlplane

import (
	"fmt"
	"net"
	"strconv"
)

// freePorts returns n distinct TCP ports on 127.0.0.1 that were free a moment ago (every
// listener stays open until all are chosen). Another process can take one before the
// component binds it; on loopback in a test that is rare.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func hostPort(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
