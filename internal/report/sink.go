package report

import (
	"context"
	"errors"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record/util"
)

// sendBackoff paces the writes of an Event the API server answered with 429
// or a server error (client-go's REST client has already waited out any
// Retry-After).
var sendBackoff = wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 5}

// mustSendBackoff paces those of an Event that matters, which are tried
// until its mustSendBudget runs out: a burst of new nodes can keep the API
// server answering 429 for longer than sendBackoff's five tries, and the
// next try after those comes only retryPause later. Past the cap, the delay
// stays at the cap.
var mustSendBackoff = wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 5, Cap: 2 * time.Second}

// An Event not given up after an error (final) is written again retryPause
// later, with a quarter of jitter so that the agents of many nodes do not
// write in step, up to maxTries times in all: client-go's
// defaultSleepDuration and maxTriesPerEvent.
const (
	retryPause = 10 * time.Second
	maxTries   = 12
)

// attempt writes the Event of an emission of key and, as client-go's
// attemptRecording does, writes it again after a pause while the error
// allows it, until maxTries or the shutdown. It reports the outcome to the
// recorder.
func (r *recorder) attempt(key seriesKey, ev *eventsv1.Event) {
	defer r.wg.Done()
	for tries := 1; ; tries++ {
		retry, err := r.record(r.ctx, key, ev)
		if !retry || tries == maxTries {
			r.settle(key, err)
			return
		}
		r.failed(key, err)
		select {
		case <-r.ctx.Done():
			r.settle(key, err)
			return
		case <-time.After(wait.Jitter(r.pause, 0.25)):
		}
	}
}

// rewrite writes a series again, once, as client-go's upkeep of its series
// does, and reports whether the write is to be tried again at the next pass
// (final). A series given up is logged.
func (r *recorder) rewrite(key seriesKey, ev *eventsv1.Event) (retry bool) {
	retry, err := r.record(r.ctx, key, ev)
	if err != nil && !retry {
		r.mu.Lock()
		if !r.closed {
			r.lost(key, err)
		}
		r.mu.Unlock()
	}
	return retry
}

// record writes ev as client-go's recordEvent does: a series by a patch of
// its series (seriesPatch), created instead if the patch finds no Event, as
// when the Event expired or its first write has not landed yet; any other
// Event is created. retry reports whether it is to be written again after a
// pause (final); err is the last write's.
func (r *recorder) record(ctx context.Context, key seriesKey, ev *eventsv1.Event) (retry bool, err error) {
	series := ev.Series != nil
	if series {
		patch, patchErr := seriesPatch(ev)
		if patchErr != nil {
			return false, patchErr
		}
		err = r.send(ctx, key, func(ctx context.Context) error {
			_, err := r.client.Patch(ctx, ev.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
			return err
		})
		if !util.IsKeyNotFoundError(err) {
			return err != nil && !final(err, series), err
		}
	}
	ev.ResourceVersion = ""
	err = r.send(ctx, key, func(ctx context.Context) error {
		_, err := r.client.Create(ctx, ev, metav1.CreateOptions{})
		return err
	})
	return err != nil && !final(err, series), err
}

// send makes a write of an Event of key, and makes it again after a 429 or
// a server error: paced by sendBackoff, or, for an Event that matters, by
// r.backoff until its deadline. Past its deadline (client-go's later tries,
// the series' upkeep), an Event that matters is written as any other.
func (r *recorder) send(ctx context.Context, key seriesKey, write func(context.Context) error) error {
	if deadline, ok := r.deadline(key); ok && matters(key.reason) && time.Now().Before(deadline) {
		return r.sendUntil(ctx, deadline, write)
	}
	var err error
	if waitErr := wait.ExponentialBackoffWithContext(ctx, sendBackoff, func(ctx context.Context) (bool, error) {
		err = write(ctx)
		return err == nil || ctx.Err() != nil || !transient(err), nil
	}); err == nil {
		err = waitErr // the context ended before the first write
	}
	return err
}

// sendUntil makes a write of an Event that matters, and makes it again after
// a 429 or a server error, until deadline; it returns the last write's
// error.
func (r *recorder) sendUntil(ctx context.Context, deadline time.Time, write func(context.Context) error) error {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var err error
	if waitErr := r.backoff.DelayFunc().Until(ctx, true, true, func(ctx context.Context) (bool, error) {
		err = write(ctx)
		switch {
		case err == nil:
			return true, nil
		case transient(err):
			return false, nil
		default:
			return false, err
		}
	}); err == nil {
		err = waitErr // the context ended before the first write
	}
	return err
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

// final reports whether an Event is given up after err, as client-go's
// recordEvent (k8s.io/client-go/tools/events) decides: an Event the API
// server refused is given up (but for a series created twice at once, whose
// next try patches the Event the other write created), as is one whose
// request could not be made; after any other error it is written again
// after a pause. A series patch that finds no Event is not given up: the
// Event is created instead (record).
func final(err error, series bool) bool {
	switch err := err.(type) {
	case *apierrors.StatusError:
		return !(series && apierrors.IsAlreadyExists(err))
	case *rest.RequestConstructionError:
		return true
	}
	return false
}
