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
	// ErrPathSmaller: the path carries smaller packets than this pod's route sends, and says
	// so: an ICMP "fragmentation needed" (IPv6 "packet too big") came back, and packets of the
	// path's size cross both ways. That is path-MTU discovery working (a link of a smaller MTU
	// on the way, an MTU being changed across the pod network), not a blackhole and not this
	// node's fault. The size returned with it is the path's.
	ErrPathSmaller = errors.New("the path's MTU is smaller than the route's")
)
