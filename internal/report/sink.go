package report

import (
	"context"
	"errors"
	"net/http"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
)

// sendBackoff paces the writes of an Event the API server answered with 429
// or a server error (client-go's REST client has already waited out any
// Retry-After).
var sendBackoff = wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 5}

// trackingSink writes Events of one subject for client-go's broadcaster,
// writes again those answered with 429 or a server error, and reports each
// outcome to the recorder.
type trackingSink struct {
	events.EventSink
	r       *recorder
	subject string
}

func (s *trackingSink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	return s.send(ctx, e, false, func(ctx context.Context) (*eventsv1.Event, error) { return s.EventSink.Create(ctx, e) })
}

func (s *trackingSink) Patch(ctx context.Context, e *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	return s.send(ctx, e, true, func(ctx context.Context) (*eventsv1.Event, error) { return s.EventSink.Patch(ctx, e, data) })
}

func (s *trackingSink) send(ctx context.Context, e *eventsv1.Event, patch bool, write func(context.Context) (*eventsv1.Event, error)) (*eventsv1.Event, error) {
	key := sendKey{e.Reason, s.subject}
	var out *eventsv1.Event
	var err error
	// Past its deadline (client-go's own later tries), an Event that
	// matters is written as any other.
	if deadline := s.r.deadline(key); matters(e.Reason) && time.Now().Before(deadline) {
		out, err = s.sendUntil(ctx, deadline, write)
	} else {
		err = retry.OnError(sendBackoff, func(err error) bool { return ctx.Err() == nil && transient(err) }, func() error {
			var err error
			out, err = write(ctx)
			return err
		})
	}
	if err == nil || final(err, patch, e.Series != nil) {
		s.r.settle(key, err)
	}
	return out, err
}

// sendUntil writes an Event that matters, and writes it again after a 429 or
// a server error, until deadline; it returns the last write's answer.
func (s *trackingSink) sendUntil(ctx context.Context, deadline time.Time, write func(context.Context) (*eventsv1.Event, error)) (*eventsv1.Event, error) {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var out *eventsv1.Event
	var err error
	_ = s.r.backoff.DelayFunc().Until(ctx, true, true, func(ctx context.Context) (bool, error) {
		out, err = write(ctx)
		switch {
		case err == nil:
			return true, nil
		case transient(err):
			return false, nil
		default:
			return false, err
		}
	})
	return out, err
}

// transient reports whether writing again soon may succeed: the API server
// was busy or failing, or did not answer.
func transient(err error) bool {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
			apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsUnexpectedServerError(err)
	}
	var construction *rest.RequestConstructionError
	return !errors.As(err, &construction)
}

// final reports whether client-go's broadcaster gives the Event up after
// err, as recordEvent in k8s.io/client-go/tools/events decides: a series
// patch that finds no Event is created instead, an Event the API server
// refused is given up (but for a series created twice at once), and after
// any other error it tries again after a pause.
func final(err error, patch, series bool) bool {
	switch err := err.(type) {
	case *apierrors.StatusError:
		if patch && err.Status().Code == http.StatusNotFound {
			return false
		}
		return !(series && apierrors.IsAlreadyExists(err))
	case *rest.RequestConstructionError:
		return true
	}
	return false
}
