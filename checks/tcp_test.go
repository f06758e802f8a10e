package checks_test

import (
	"net"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeready/nodeready/checks"
)

// listen returns the address of a loopback listener that accepts and closes
// connections until the test ends.
func listen(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	return acceptAll(t, ln)
}

// acceptAll accepts and closes connections on ln until the test ends, and
// returns ln's address.
func acceptAll(t *testing.T, ln net.Listener) string {
	return serveConns(t, ln, func(conn net.Conn) { conn.Close() })
}

// serveConns hands each connection ln accepts to handle until the test ends, and
// returns ln's address.
func serveConns(t *testing.T, ln net.Listener, handle func(net.Conn)) string {
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			handle(conn)
		}
	}()
	return ln.Addr().String()
}

// closedAddr returns a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

func TestTCP(t *testing.T) {
	tests := []struct {
		name    string
		addr    string
		dialer  *net.Dialer
		wantErr string
	}{
		{name: "accepted", addr: listen(t)},
		{name: "accepted with own dialer", addr: listen(t), dialer: &net.Dialer{KeepAlive: -1}},
		{name: "refused", addr: closedAddr(t), wantErr: "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := checks.NewTCP(tt.addr, tt.dialer)
			requireIdentity(t, c, "tcp", tt.addr)

			res := checks.Execute(t.Context(), c, runTimeout)

			if tt.wantErr == "" {
				assert.NoError(t, res.Err)
				return
			}
			require.Error(t, res.Err)
			assert.Equal(t, "dial tcp "+tt.addr+": connect: "+tt.wantErr, res.Err.Error())
			assert.ErrorIs(t, res.Err, syscall.ECONNREFUSED)
		})
	}
}
