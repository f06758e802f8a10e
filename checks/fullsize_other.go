//go:build !linux

package checks

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
)

// PingFullSize is Linux's only: the agent's image is Linux; a dry run elsewhere says that
// full size was not checked.
func PingFullSize(context.Context, netip.Addr) (int, error) {
	return 0, fmt.Errorf("%w: no ping socket on %s", ErrFullSizeNotChecked, runtime.GOOS)
}

func tcpMSS(net.Conn) (int, error) {
	return 0, errors.New("the MSS is read on Linux only")
}
