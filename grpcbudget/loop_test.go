package grpcbudget_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/grpcbudget"
	"github.com/retrybudget/retrybudget/stress"
)

// A stressStatus is what the fake invoker returns for an error of the
// loop checks: a status error of code that wraps the check's error, so
// that the checks still find theirs.
type stressStatus struct {
	code codes.Code
	err  error
}

func (e *stressStatus) Error() string              { return e.err.Error() }
func (e *stressStatus) Unwrap() error              { return e.err }
func (e *stressStatus) GRPCStatus() *status.Status { return status.New(e.code, e.err.Error()) }

// invoker returns a fake invoker whose attempts run op, and which maps
// op's errors onto statuses: stress.ErrTransient to UNAVAILABLE, a
// *stress.RetryAfterError to RESOURCE_EXHAUSTED with its delay as the
// pushback trailer (rounded up to a millisecond), stress.ErrPermanent to
// INVALID_ARGUMENT, and a context's error to its status.
func invoker(op func(context.Context) error) grpc.UnaryInvoker {
	return func(ctx context.Context, _ string, _, _ any, _ *grpc.ClientConn, opts ...grpc.CallOption) error {
		err := op(ctx)
		var ra *stress.RetryAfterError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &ra):
			ms := (ra.Delay + time.Millisecond - 1) / time.Millisecond
			setTrailer(opts, metadata.Pairs(grpcbudget.PushbackKey, strconv.FormatInt(int64(ms), 10)))
			return &stressStatus{codes.ResourceExhausted, err}
		case errors.Is(err, stress.ErrTransient):
			return &stressStatus{codes.Unavailable, err}
		case errors.Is(err, stress.ErrPermanent):
			return &stressStatus{codes.InvalidArgument, err}
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			return &stressStatus{status.FromContextError(err).Code(), err}
		}
		return &stressStatus{codes.Unknown, err}
	}
}

// unaryLoop adapts the unary interceptor to the loop checks: each call
// makes an interceptor of a Retrier configured from the check's Settings,
// as stress.RetrierLoop does, and calls it with the fake invoker.
func unaryLoop() stress.Loop {
	return stress.Loop{
		Name: "grpcbudget.UnaryClientInterceptor",
		Call: func(ctx context.Context, b budget.Budget, s stress.Settings, op func(context.Context) error) error {
			r := &budget.Retrier{Budget: b, MaxAttempts: s.MaxAttempts, BaseDelay: s.BaseDelay, MaxDelay: s.MaxDelay, MaxElapsed: s.MaxElapsed}
			switch {
			case s.FixedDelay:
				r.Jitter = func(time.Duration) time.Duration { return s.BaseDelay }
			case s.NoJitter:
				r.Jitter = func(ceiling time.Duration) time.Duration { return ceiling }
			}
			return grpcbudget.UnaryClientInterceptor(r)(ctx, "/stress.Loop/Call", nil, nil, nil, invoker(op))
		},
		Skip: map[string]string{
			"HedgeLosersCancelled": "the interceptor runs a budget.Retrier, which does not hedge",
			"UncappedLoopEnds":     "the interceptor runs a budget.Retrier, which always has an attempt limit",
		},
	}
}

// The unary interceptor keeps every promise of a retry loop, each check
// in a child process.
func TestUnaryLoopChecks(t *testing.T) {
	budgettest.RunLoop(t, unaryLoop())
}
