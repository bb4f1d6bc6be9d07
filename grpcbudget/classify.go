package grpcbudget

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/retrybudget/retrybudget/budget"
)

// PushbackKey is the trailer in which a server tells the client when to
// retry (gRFC A6). A non-negative integer, in milliseconds, asks for a
// retry after that long: the interceptors wait that long in place of the
// backoff, but no longer than the Retrier's MaxDelay (20s when zero), and
// give up at once (budget.ErrNoTime) when the wait would reach the call's
// deadline or the Retrier's MaxElapsed; the budget must still grant the
// retry. A negative or unreadable value, or more than one value, means do
// not retry: the call ends with the attempt's error, and the failure still
// counts against a budget that counts failures (a budget.FailureCounter,
// such as budget.Throttle), as it does in grpc-go, whatever its status
// code.
const PushbackKey = "grpc-retry-pushback-ms"

// An attemptError is a failed attempt's error with the interceptor's
// verdict on it, which classify hands the Retrier. It reads as the
// attempt's error, and wraps it marked as budget marks errors, so that a
// loop of the caller's own reads the verdict with budget.DefaultClassifier:
// not retryable (budget.MarkPermanent), or the kind of retry.
type attemptError struct {
	err  error
	kind budget.Kind // Transient or Throttled; anything else is not retried
	// final marks a failure of a retry kind that the server forbade to
	// retry: it is not retried, and a budget.FailureCounter counts it.
	final bool
	mark  error // err, marked with the verdict
}

// verdict returns err's attemptError of kind, final or not.
func verdict(err error, kind budget.Kind, final bool) attemptError {
	var mark error
	switch {
	case final || !kind.IsRetry():
		mark = budget.MarkPermanent(err)
	case kind == budget.Transient:
		mark = budget.MarkTransient(err)
	default:
		mark = budget.MarkThrottled(err, 0) // a delay, if any, is a pushbackError's
	}
	return attemptError{err: err, kind: kind, final: final, mark: mark}
}

// committed returns the attemptError of err, the failure of an attempt
// whose response had begun: not retried.
func committed(err error) error {
	e := verdict(err, budget.FirstAttempt, false)
	return &e
}

func (e *attemptError) Error() string { return e.err.Error() }
func (e *attemptError) Unwrap() error { return e.mark }

// A pushbackError is a retryable attemptError after which the server asked
// for a delay: its RetryAfter method replaces the Retrier's backoff, up to
// the Retrier's MaxDelay.
type pushbackError struct {
	attemptError
	after time.Duration
}

func (e *pushbackError) RetryAfter() time.Duration { return e.after }
func (e *pushbackError) Unwrap() error             { return &e.attemptError }

// classify is the Retrier's Classifier: it reads the verdict the attempt
// left on its error. An error without one is not retried. A failure the
// server forbade to retry is returned with its kind and false, which the
// Retrier tells a budget.FailureCounter of.
func classify(err error) (budget.Kind, bool) {
	var e *attemptError
	if errors.As(err, &e) {
		return e.kind, e.kind.IsRetry() && !e.final
	}
	return budget.FirstAttempt, false
}

// attemptError gives err, an attempt's error, its verdict: by the pushback
// in trailer, if it forbids a retry, then by its status code, then by the
// pushback's delay. As in grpc-go, a pushback that forbids a retry makes a
// failure counted against a budget that counts failures whatever its code:
// of its code's kind when that is a retry kind, else Throttled, since the
// server pushed back.
func (c *config) attemptError(err error, trailer metadata.MD) error {
	kind, ok := c.codes[status.Code(err)]
	if !ok || !kind.IsRetry() {
		kind = budget.FirstAttempt
	}
	after, present, retry := pushback(trailer)
	var e attemptError
	switch {
	case !retry && kind.IsRetry():
		e = verdict(err, kind, true)
	case !retry:
		e = verdict(err, budget.Throttled, true)
	case !kind.IsRetry():
		e = verdict(err, budget.FirstAttempt, false)
	case present:
		return &pushbackError{verdict(err, kind, false), after}
	default:
		e = verdict(err, kind, false)
	}
	return &e
}

// pushback reads the server's pushback from trailer: whether there is one,
// the delay it asks for, and whether it allows a retry.
func pushback(trailer metadata.MD) (after time.Duration, present, retry bool) {
	v := trailer.Get(PushbackKey)
	switch len(v) {
	case 0:
		return 0, false, true
	case 1:
	default:
		return 0, true, false
	}
	ms, err := strconv.ParseInt(v[0], 10, 64)
	switch {
	case errors.Is(err, strconv.ErrRange) && ms > 0:
		return math.MaxInt64, true, true // the Retrier caps it at MaxDelay
	case err != nil || ms < 0:
		return 0, true, false
	case ms > math.MaxInt64/int64(time.Millisecond):
		return math.MaxInt64, true, true
	}
	return time.Duration(ms) * time.Millisecond, true, true
}

// result turns what Retrier.Do returned for a call on ctx into what the
// call returns: an attempt's own error when it was not retried; for a call
// whose context ended, an error with the context's status code.
func result(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
		return &contextError{err: err, code: status.FromContextError(cerr).Code()}
	}
	switch e := err.(type) {
	case *attemptError:
		return e.err
	case *pushbackError:
		return e.err
	}
	return err
}

// A contextError is the outcome of a call whose context ended: its status
// code is the context's (CANCELLED or DEADLINE_EXCEEDED), as a call without
// the interceptor would have, and it wraps what Retrier.Do returned: the
// context's error, and the last attempt's error if there was an attempt.
type contextError struct {
	err  error
	code codes.Code
}

func (e *contextError) Error() string {
	return "grpcbudget: " + strings.ReplaceAll(e.err.Error(), "\n", "; ")
}

func (e *contextError) Unwrap() error { return e.err }

// GRPCStatus returns the context's status, for package status.
func (e *contextError) GRPCStatus() *status.Status { return status.New(e.code, e.Error()) }
