// Package stress checks a retry loop against the promises a loop must keep
// under cancellation and contention, whatever the loop: ours, the AWS SDK's,
// or yours, through a small adapter.
//
// A [Loop] runs one call of a retry loop with the budget, [Settings] and
// operation a check gives it. [LoopChecks] are the sixteen checks: no attempt
// on a done context, none after a cancel, none on a context whose ctx.Err()
// is set at the deadline; no wait begun that would reach the deadline; a
// prompt return on a cancel during the wait; no goroutine outlives the
// call; a shared budget asked once per retry, before waiting; no retry of
// a permanent error; an elapsed limit that ends the loop; a server delay
// capped by the maximum and the time left; a call whose operation ignores
// ctx returns when every attempt has finished (a loop that hedges waits for
// its losers); an in-flight budget (budget.InFlightBudget) told of the end
// of every attempt the loop started, a granted retry that never ran
// included, exactly once, and then of the end of the call, on every path
// out of the loop (a loop that hedges ends its losers too); a budget that
// counts failures (budget.FailureCounter) told of each retryable failure
// once, through Retry or, when the loop gives up after it without asking,
// through Failed; every success told to the budget once, with the kind of
// the attempt that succeeded, before the call returns, and none the loop
// did not see; a hedge's losers cancelled as soon as one attempt wins, and
// no hedge started that the budget denied when Settings.HedgeAsksBudget
// says to ask; and, under Settings.NoAttemptCap, a loop with no attempt
// cap that still ends on a cancel (with the context's error), on a
// permanent error and on a denial. Time-dependent
// checks run in testing/synctest bubbles, the leak check in real time: it
// counts the goroutines the call started, and those they started, told
// from others by a profiler label Go hands down to them, so that a test
// running in parallel is no leak of the loop's.
//
// Each check first confirms its premise, the situation in which its rule
// can be broken, and fails with "premise not reached:" when the loop never
// brought it about, rather than passing vacuously; Settings.FixedDelay and
// Settings.NoJitter ask a loop for the waits some premises need. A loop that
// makes 1000 attempts at one instant of a bubble's clock spins: the check
// stops it and fails at once.
//
// budgettest.RunLoop runs each check in a child process of
// its own, so that a loop that leaks inside a bubble, panics or hangs fails
// its check instead of taking the test binary down; [IsolatedLoopChecks]
// returns the outcomes instead of failing, for pinning known verdicts.
// [RetrierLoop] is the adapter of budget.Retrier.
//
// The budget side of stress, many goroutines against one budget with the
// conservation invariants checked from the log, is budgettest's Race and
// Invariant checks.
package stress
