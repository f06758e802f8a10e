package sigterm

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSignalBeforeTheContextIsKept: a SIGTERM that arrives before main asks
// for its context (while the process starts) neither ends the process nor is
// lost: the context ends with it.
func TestSignalBeforeTheContextIsKept(t *testing.T) {
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
	require.Eventually(t, func() bool { return len(caught) == 1 }, 5*time.Second, time.Millisecond, "signal caught")

	ctx, stop := NotifyContext(context.Background())
	defer stop()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("context did not end")
	}
	assert.EqualError(t, context.Cause(ctx), "terminated signal received")
}

func TestStopReleasesTheContext(t *testing.T) {
	ctx, stop := NotifyContext(context.Background())
	stop()
	<-ctx.Done()
	assert.ErrorIs(t, context.Cause(ctx), context.Canceled)
}
