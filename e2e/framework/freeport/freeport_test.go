package freeport_test

import (
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeready/nodeready/e2e/framework/freeport"
)

func TestPorts(t *testing.T) {
	ports, err := freeport.Ports(50)
	require.NoError(t, err)
	seen := map[int]bool{}
	for _, p := range ports {
		assert.False(t, seen[p], "port %d twice", p)
		seen[p] = true
		assert.True(t, p >= 20000 && p <= 32767, "port %d outside 20000-32767, below the ephemeral range", p)
	}
	l, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(ports[0])))
	require.NoError(t, err, "the port is free on every address")
	l.Close()
}
