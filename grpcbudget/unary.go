package grpcbudget

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/retrybudget/retrybudget/budget"
)

// UnaryClientInterceptor returns an interceptor that runs each unary call
// under r: [budget.Retrier.Do] with the call's context, an attempt per
// invoker call, each with the attempt's context and the call's options.
//
// It retries UNAVAILABLE as budget.Transient and RESOURCE_EXHAUSTED as
// budget.Throttled (see [WithCodes] to change that), and honours the
// server's pushback, read from each attempt's trailer (see [PushbackKey]).
// A call that is not retried returns the invoker's error as it is. Call
// options apply to every attempt: grpc.Header and grpc.Trailer are left
// with the last attempt's metadata, and grpc.OnFinish runs once per
// attempt.
//
// The interceptor copies *r when it is made, and replaces the copy's
// Classify with its own: later changes to r are not seen, and r.Classify is
// not used. A nil r means the zero Retrier: 3 attempts, the default
// backoff, no budget. The budget itself is shared: share r.Budget with
// every interceptor and call site that calls the same dependency.
//
// The interceptor is safe for concurrent use by multiple goroutines.
func UnaryClientInterceptor(r *budget.Retrier, opts ...Option) grpc.UnaryClientInterceptor {
	c := newConfig(r, opts)
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts ...grpc.CallOption) error {
		rt, err := c.retrier(ctx, method, cc)
		if err != nil {
			return err
		}
		// One trailer and one set of options serve every attempt: grpc
		// writes each attempt's trailer into md as the attempt ends.
		var md metadata.MD
		attemptOpts := append(callOpts[:len(callOpts):len(callOpts)], grpc.Trailer(&md))
		return result(ctx, rt.Do(ctx, func(ctx context.Context, _ budget.Attempt) error {
			md = nil
			err := invoker(ctx, method, req, reply, cc, attemptOpts...)
			if err == nil {
				return nil
			}
			return c.attemptError(err, md)
		}))
	}
}
