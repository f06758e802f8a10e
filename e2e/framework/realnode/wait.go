package realnode

import (
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var getOptions = metav1.GetOptions{}

// backoffStop ends waitFor at once with its error.
type backoffStop struct{ err error }

func (b backoffStop) Error() string { return b.err.Error() }

// waitFor polls cond until it returns nil, returns a backoffStop, or timeout passes.
func waitFor(timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		var stop backoffStop
		switch {
		case err == nil:
			return nil
		case errors.As(err, &stop):
			return stop.err
		case time.Now().After(deadline):
			return fmt.Errorf("after %s: %w", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
