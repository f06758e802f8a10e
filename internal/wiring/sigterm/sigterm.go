// Package sigterm catches SIGTERM and SIGINT from the first moments of the
// process, for main's root context.
//
// Until a program asks for a signal, the Go runtime ends the process on
// SIGTERM: a pod deleted while its agent starts would die of the signal
// (exit code 143, or 2 as a container's PID 1) instead of aborting cleanly
// with exit code 0. main runs only after every imported package is
// initialized, the Kubernetes client packages ten and more milliseconds into
// the process, more on a busy node. Go initializes a package as soon as its
// imports are; this one imports only the standard library, so it asks for
// the signals within the process's first millisecond or two.
package sigterm

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"
)

// caught holds the first signal until NotifyContext takes it.
var caught = make(chan os.Signal, 1)

func init() { signal.Notify(caught, syscall.SIGTERM, os.Interrupt) }

// NotifyContext returns a context that ends at the first SIGTERM or SIGINT
// since the process started, also one that came before the call, with the
// cause "<signal> signal received" as os/signal.NotifyContext gives, and the
// function that releases it. Call it once.
func NotifyContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	go func() {
		select {
		case s := <-caught:
			cancel(errors.New(s.String() + " signal received"))
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}
