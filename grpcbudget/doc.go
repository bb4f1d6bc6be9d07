// Package grpcbudget retries gRPC client calls under a retry budget: client
// interceptors that run each call through a retry loop, a [budget.Retrier]
// or any other [budget.Loop].
//
// It is a module of its own, so that a program that imports package budget
// never downloads grpc-go.
//
// The pieces fit together like this:
//
//   - [UnaryClientInterceptor] runs each unary call under the loop's Do
//     ([budget.Loop.Do]) with the call's context; each attempt calls the
//     invoker with the attempt's context.
//   - [StreamClientInterceptor] does the same for streams whose client sends
//     one message (server-streaming calls), up to the first response: it
//     opens the stream again and resends the request only while nothing of
//     the response has arrived. Client-streaming and bidirectional streams
//     pass through, never retried.
//   - The interceptors classify by status code: UNAVAILABLE is retried as
//     [budget.Transient], RESOURCE_EXHAUSTED as [budget.Throttled], every
//     other code (CANCELLED and DEADLINE_EXCEEDED included) is not retried.
//     [WithCodes] changes the set.
//   - The server's pushback (gRFC A6), the trailer grpc-retry-pushback-ms, is
//     honoured: a non-negative number of milliseconds replaces the backoff
//     before the retry; a negative or unreadable value stops the retries.
//   - As in gRFC A6, a call is retried only until the server commits it:
//     an attempt that fails after its response's header arrived is not
//     retried, whatever its status; a trailers-only response has no header.
//   - Each retry tells the server how many attempts came before it, in the
//     request header grpc-previous-rpc-attempts (gRFC A6), as grpc-go's own
//     retries do.
//   - [WithBudgetFor] picks the budget per call, for a budget per
//     destination (of a *budget.Retrier: see below).
//   - The interceptors take any [budget.Loop]: a *budget.Retrier, which they
//     copy and tune (its Classify, its Budget from WithBudgetFor), or a loop
//     of your own, which they run as it is. Such a loop reads what each
//     attempt came to from the attempt's error, as a Retrier does:
//     [budget.DefaultClassifier] returns the interceptor's verdict, a
//     RetryAfter() time.Duration method the pushback's delay, and
//     [status.Code] the code. Its attempts run one at a time, a hedge
//     waiting for the attempt before it (a call has one reply to decode
//     into: for hedged calls, use grpc-go's own hedgingPolicy). WithBudgetFor
//     does not work with such a loop, which keeps its budget itself.
//
// Typical use shares one Retrier, and its budget, per dependency:
//
//	tb, err := budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
//	...
//	r := &budget.Retrier{Budget: tb}
//	conn, err := grpc.NewClient(target,
//		grpc.WithTransportCredentials(creds),
//		grpc.WithUnaryInterceptor(grpcbudget.UnaryClientInterceptor(r)),
//		grpc.WithStreamInterceptor(grpcbudget.StreamClientInterceptor(r)))
//
// The interceptors do the work of grpc-go's own retry policy (a service
// config's retryPolicy); use one or the other, not both, or each attempt of
// one becomes several of the other.
//
// When a call gives up, it returns the last attempt's error, wrapped: test
// it with [status.Code] for the gRPC code, and with [errors.Is] for
// [budget.ErrDenied] and the Retrier's other reasons. A call whose context
// ends returns an error whose code is CANCELLED or DEADLINE_EXCEEDED, as
// without the interceptor, and which wraps the context's error.
package grpcbudget
