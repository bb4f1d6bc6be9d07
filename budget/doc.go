// Package budget defines the retry-budget contract and ships four reference
// budgets that are safe for concurrent use and allocate nothing per call
// ([TokenBucket], [Ratio], [Throttle], [InFlight]), a [Keyed] set of budgets
// per key, and [Retrier], a retry loop that asks a budget.
//
// A retry budget is one allowance shared by every call that may retry. Work
// that succeeds funds it; when failures pile up it drains, and callers fail
// fast instead of multiplying the load on a dependency that is already sick.
//
// The pieces fit together like this:
//
//   - [Budget] is the contract: [Budget.Request] when a first attempt starts,
//     [Budget.Retry] to ask for (and be charged for) a retry after a failure of
//     a given [Kind], and [Budget.Success] when an attempt succeeds.
//   - [TokenBucket] is the AWS SDK's retry quota (500 tokens, 14 per transient
//     retry, 5 per throttled retry), with an optional time-based refill.
//   - [Ratio] caps retries at a share of requests over a sliding window, with
//     a floor for low traffic (Google SRE book, Envoy, Finagle).
//   - [Throttle] is gRPC's retry throttling (gRFC A6).
//   - [InFlight] caps the retries in flight at a share of the calls in
//     flight, with a floor (Envoy's and Istio's retry budget).
//   - Budgets whose answers depend on time read a [Clock] chosen at
//     construction; [ManualClock] lets tests drive time by hand.
//
// Fractional quantities (tokens, ratios) are kept in integer fixed point, so a
// budget's answers are exact and match the sequential specifications in the
// model package bit for bit.
//
// Typical use shares one budget per dependency across every call site:
//
//	b.Request() // a first attempt starts
//	kind := budget.FirstAttempt
//	for {
//		err := call(ctx)
//		if err == nil {
//			b.Success(kind) // refunds a successful retry, credits a first attempt
//			return nil
//		}
//		k, retryable := classify(err) // budget.Transient or budget.Throttled
//		if !retryable || !b.Retry(k) {
//			return err // permanent, or the budget said no: fail now
//		}
//		kind = k
//		// wait for the backoff, racing ctx.Done()
//	}
//
// # Closing a budget
//
// A budget that owns goroutines or connections (an actor, a client of a
// server) may have a Close() error method that releases them; the
// reference budgets own nothing and have none. Close may race calls: a
// call made while Close runs, or after it has returned, must return
// without panicking and without blocking for ever. Whether such a call
// takes effect is the budget's choice (denying a retry is the usual
// answer); the model is not asked. Once Close and every call have
// returned, no goroutine the budget started may be left. budgettest's
// Leak check holds a budget to this: four goroutines call it while Close
// runs and after, and every call must return within 10 s.
package budget
