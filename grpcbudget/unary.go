package grpcbudget

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/retrybudget/retrybudget/budget"
)

// UnaryClientInterceptor returns an interceptor that runs each unary call
// under l, most often a *budget.Retrier: [budget.Loop.Do] with the call's
// context, an attempt per invoker call, each with the attempt's context and
// the call's options.
//
// It retries a failed attempt, as gRFC A6 has grpc-go's own retry policy
// do, until one of these ends the call:
//
//   - the attempt's status is not retried: UNAVAILABLE is retried as
//     budget.Transient and RESOURCE_EXHAUSTED as budget.Throttled (see
//     [WithCodes] to change that), every other code is not;
//   - the server's pushback, read from the attempt's trailer (see
//     [PushbackKey]), forbids a retry;
//   - the attempt had received the response's header before it failed:
//     the server has committed the call, which is not retried whatever its
//     status (a trailers-only response has no header, and is retried);
//   - the budget denies the retry (budget.ErrDenied);
//   - the Retrier runs out of attempts (budget.ErrAttempts), or of time:
//     the next wait would reach the call's deadline or the Retrier's
//     MaxElapsed (budget.ErrNoTime);
//   - the call's context ends: its code is then CANCELLED or
//     DEADLINE_EXCEEDED.
//
// Each retry's request carries the header grpc-previous-rpc-attempts, the
// number of attempts before it ("1" on the second attempt), in place of any
// value the caller's outgoing metadata had for that key; the first
// attempt's metadata is the caller's, untouched.
//
// A call that is not retried returns the invoker's error as it is. Call
// options apply to every attempt: grpc.Header and grpc.Trailer are left
// with the last attempt's metadata, and grpc.OnFinish runs once per
// attempt.
//
// The interceptor copies a *budget.Retrier when it is made, and replaces
// the copy's Classify with its own: later changes to the Retrier are not
// seen, and its Classify is not used. A nil l, a nil *budget.Retrier
// included, means the zero Retrier: 3 attempts, the default backoff, no
// budget. The budget itself is shared: share the Retrier's Budget with
// every interceptor and call site that calls the same dependency.
//
// Any other [budget.Loop], a loop of your own, runs each call as it is.
// The interceptor tells it what each attempt came to through the
// attempt's error: [budget.DefaultClassifier] of the error returns the
// verdict above (the kind of retry, or not retryable: for a code not
// retried, a committed call, a pushback that forbids a retry), and an
// error after which the server pushed back has a RetryAfter()
// time.Duration method that returns the pushback's delay; [status.Code]
// of the error is the attempt's code. The loop's attempts run one at a
// time, since a call has one reply to decode into: an attempt the loop
// starts while another runs, a hedge, waits for it to end, and sends
// nothing once an attempt has succeeded. grpc-previous-rpc-attempts counts
// the attempts the interceptor sent, whatever the loop's Attempt says. A
// loop that returns nil when no attempt succeeded is an error (INTERNAL),
// and so is every call when the interceptor has [WithBudgetFor], which
// needs a *budget.Retrier.
//
// The interceptor is safe for concurrent use by multiple goroutines.
func UnaryClientInterceptor(l budget.Loop, opts ...Option) grpc.UnaryClientInterceptor {
	c := newConfig(l, opts)
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts ...grpc.CallOption) error {
		if c.loop != nil {
			return c.unaryLoop(ctx, method, req, reply, cc, invoker, callOpts)
		}
		rt, err := c.retrier(ctx, method, cc)
		if err != nil {
			return err
		}
		// One header, one trailer and one set of options serve every
		// attempt: grpc writes each attempt's header and trailer into md as
		// the attempt ends, if it got as far as opening a stream. The
		// header stays nil for a trailers-only response. Its copy costs
		// grpc a few allocations per attempt: the price of knowing whether
		// the server committed the call.
		var md struct{ header, trailer metadata.MD }
		attemptOpts := append(callOpts[:len(callOpts):len(callOpts)], grpc.Header(&md.header), grpc.Trailer(&md.trailer))
		return result(ctx, rt.Do(ctx, func(ctx context.Context, a budget.Attempt) error {
			md.header, md.trailer = nil, nil
			if a.N > 1 {
				ctx = withPreviousAttempts(ctx, a.N-1)
			}
			err := invoker(ctx, method, req, reply, cc, attemptOpts...)
			if err == nil {
				return nil
			}
			if md.header != nil {
				// The response had begun: the call is committed.
				return committed(err)
			}
			return c.attemptError(err, md.trailer)
		}))
	}
}

// unaryLoop runs a unary call under a loop of the caller's own, as the
// Retrier's call runs but that its attempts take turns.
func (c *config) unaryLoop(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts []grpc.CallOption) error {
	if c.misuse != nil {
		return c.misuse
	}
	var md struct{ header, trailer metadata.MD }
	attemptOpts := append(callOpts[:len(callOpts):len(callOpts)], grpc.Header(&md.header), grpc.Trailer(&md.trailer))
	t := newTurns()
	err := c.loop.Do(ctx, func(ctx context.Context, _ budget.Attempt) (err error) {
		n, err := t.start(ctx)
		if err != nil {
			return err
		}
		defer func() { t.end(err == nil) }()
		md.header, md.trailer = nil, nil
		if n > 1 {
			ctx = withPreviousAttempts(ctx, n-1)
		}
		err = invoker(ctx, method, req, reply, cc, attemptOpts...)
		switch {
		case err == nil:
			return nil
		case md.header != nil:
			return committed(err)
		}
		return c.attemptError(err, md.trailer)
	})
	return result(ctx, t.close(ctx, c.loop, err))
}
