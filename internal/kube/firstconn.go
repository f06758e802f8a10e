package kube

import (
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
)

// firstConn holds a new client's requests back until its first request has a
// connection, so that they share it. The agent starts with several requests at
// once (the watch of its node and the checks'): on a client with no connection
// yet, each would dial and complete a TLS handshake of its own, and all but one
// connection would be closed once HTTP/2 turned out to carry them all. Each
// handshake costs the API server CPU, the more for thousands of new nodes at
// once; waiting for the first connection costs the requests nothing, as each
// would have waited for a dial of its own. With HTTP/2, the requests let go
// find the connection in the pool and share it; over HTTP/1 each then dials,
// as before.
type firstConn struct {
	next    http.RoundTripper
	started atomic.Bool
	ready   chan struct{}
	release func()
}

func newFirstConn(next http.RoundTripper) http.RoundTripper {
	f := &firstConn{next: next, ready: make(chan struct{})}
	f.release = sync.OnceFunc(func() { close(f.ready) })
	return f
}

func (f *firstConn) RoundTrip(req *http.Request) (*http.Response, error) {
	if f.started.CompareAndSwap(false, true) {
		trace := &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { f.release() }}
		resp, err := f.next.RoundTrip(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
		f.release() // also when it got no connection
		return resp, err
	}
	select {
	case <-f.ready:
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
	return f.next.RoundTrip(req)
}

// WrappedRoundTripper lets client-go's transport utilities see through the
// wrapper (utilnet.CloseIdleConnectionsFor, for one).
func (f *firstConn) WrappedRoundTripper() http.RoundTripper { return f.next }
