package budget

import "context"

// A Loop is a retry loop: it runs an operation, one call of op per attempt,
// and retries it as it sees fit. [*Retrier] is the package's own; the
// adapters (packages httpbudget and grpcbudget) take any Loop, so that a
// loop of your own, one that hedges say, or one built on another retry
// library, can run their attempts.
//
// Do calls op until an attempt returns nil, and then returns nil; or it
// gives up and returns why, preferably an error that wraps op's last error, as a
// Retrier's does. Each call of op gets a context derived from ctx (ctx
// itself will do), which the loop may end to end the attempt, and the
// [Attempt] it is; of that the adapters read only the first attempt's Key,
// the call's dedup key, and pick one of their own when it is zero. A loop
// learns what an attempt's error calls for as a Retrier does:
// [DefaultClassifier] says whether it may be retried and as which [Kind]
// (the adapters mark their errors with [MarkPermanent], [MarkTransient] and
// [MarkThrottled]), and an error with a RetryAfter() time.Duration method
// carries the delay the server asked for. Attempts may overlap, as a
// hedging loop's do, but every attempt Do starts must have returned before
// Do returns.
//
// A Loop must be safe for concurrent use by multiple goroutines: an adapter
// shares one across its calls.
type Loop interface {
	Do(ctx context.Context, op func(ctx context.Context, a Attempt) error) error
}

var _ Loop = (*Retrier)(nil)
