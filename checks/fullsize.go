package checks

import (
	"errors"
)

// The outcomes of a full-size probe that proved no size.
var (
	// ErrFullSizeLost: packets of the route's full size do not cross while small ones do, with
	// no ICMP error back (an MTU blackhole): every transfer larger than a few hundred bytes
	// hangs. A fault of the path, not a reason to skip.
	ErrFullSizeLost = errors.New("full-size packets lost")
	// ErrFullSizeNotChecked: full size could not be probed from here (no ping socket, ICMP
	// filtered on the way). The verdict says so; it never counts as proven.
	ErrFullSizeNotChecked = errors.New("full size not checked")
)
