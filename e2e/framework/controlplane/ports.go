package controlplane

import (
	"net"
	"strconv"
)

func hostPort(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
