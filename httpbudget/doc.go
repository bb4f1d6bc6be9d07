// Package httpbudget retries HTTP requests under a retry budget: an
// [http.RoundTripper], [Transport], that runs each request through a retry
// loop, a [budget.Retrier] or any other [budget.Loop].
//
// The pieces fit together like this:
//
//   - [Transport.RoundTrip] runs each request under the Retrier's Do
//     ([budget.Loop.Do]) with the request's context; each attempt is a
//     RoundTrip of the Transport's Base (http.DefaultTransport when nil)
//     with the attempt's context.
//   - Transport.ClassifyResponse, a [ResponseClassifier], says which
//     responses are retried and as which kind. Nil means
//     [DefaultResponseClassifier], by status: 502 and 504 are retried as
//     [budget.Transient]; 429 and 503 as [budget.Throttled], after the
//     delay of their Retry-After header, capped at the Retrier's MaxDelay.
//     Every other response is returned as it is, at once. Errors of Base
//     go to the Retrier's Classify (the default retries them all as
//     Transient, certificate errors included); a context's errors are
//     never retried.
//   - Only requests that can be replayed safely are retried: idempotent
//     methods, or a request with an idempotency key, and a body that
//     GetBody can make again. Transport.RetryNonIdempotent retries POST and
//     PATCH too, each attempt carrying the call's dedup key
//     ([budget.Attempt.Key]) as an Idempotency-Key header.
//   - When the Retrier gives up on a response, the caller gets that last
//     response, with its body, and a nil error, as from any RoundTripper.
//     RoundTrip returns an error only when Base fails (and the Retrier
//     gives up), when the request's context ends, or when BudgetFor or the
//     request's GetBody fails.
//   - A response that may be retried has its body read at once, up to
//     4 KiB, and closed when that is all of it, so that its connection
//     serves other requests during the backoff wait.
//   - Transport.BudgetFor picks the budget per request, for a budget per
//     destination (of a *budget.Retrier: see below).
//   - The Retrier field takes any [budget.Loop]: a *budget.Retrier, which
//     the Transport tunes per request (its Classify, its MaxAttempts for a
//     request sent once, its Budget from BudgetFor), or a loop of your own,
//     one that hedges say, which it runs as it is. Such a loop reads what
//     each attempt came to from the attempt's error, as a Retrier does:
//     [budget.DefaultClassifier] returns the Transport's verdict on a
//     response, and a RetryAfter() time.Duration method its Retry-After
//     delay. The Transport's doc, "A loop of your own", says what differs;
//     BudgetFor does not work with such a loop, which keeps its budget
//     itself.
//
// Typical use shares one Retrier, and its budget, per dependency:
//
//	tb, err := budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
//	...
//	client := &http.Client{Transport: &httpbudget.Transport{
//		Retrier: &budget.Retrier{Budget: tb, MaxDelay: 5 * time.Second},
//	}}
//
// The Transport retries on top of whatever Base does itself:
// [http.Transport] resends an idempotent request, once, when a connection
// it reused turns out closed before the request was written; that resend is
// part of one attempt here and costs the budget nothing. The deprecated
// Request.Cancel channel is honoured by Base during attempts, not during
// the Retrier's waits; use the request's context.
package httpbudget
