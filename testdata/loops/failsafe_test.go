package loops

import (
	"context"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/retrypolicy"

	"example.com/looptrack"
	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/stress"
)

// failsafeLoop runs one call of failsafe-go's retry policy,
// failsafe.With(policy).WithContext(ctx).Run, with a policy
// built from the Settings with its Builder: WithMaxAttempts(MaxAttempts, or
// -1, the library's no limit, for NoAttemptCap),
// WithMaxDuration(MaxElapsed) when there is a limit, and
// WithBackoff(BaseDelay, MaxDelay) (factor 2: BaseDelay×2^(n-1), capped),
// or WithDelay(BaseDelay) for FixedDelay (a zero delay is no wait). It sets
// no jitter, the library's default: its jitter (WithJitter,
// WithJitterFactor) is applied in getDelay after the DelayFunc, to a
// server delay as much as to the backoff, so it could not leave a server
// delay as the server asked. HandleIf(classify) makes only the retryable
// errors failures; the permanent error is a result the policy does not
// handle, which Run returns at once. A *stress.RetryAfterError's delay
// comes from WithDelayFunc, as failsafehttp.DelayFunc takes Retry-After
// (-1, for any other error, leaves the backoff).
//
// The budget is asked in AbortIf, which the executor calls after every
// failure it handles (retryexecutor.go, OnFailure), before it waits; a
// denial aborts, and Run returns the last error at once. OnFailure decides
// whether retries are exceeded (failed attempts past MaxRetries, or
// ElapsedTime past MaxDuration) before it calls AbortIf, and does not tell
// it: the adapter works out the same, by counting the attempts and
// timing the call from just before Run, and asks only when a retry is
// left. (Out of a bubble, its clock reads come a moment before the
// library's start and after its ElapsedTime, so a failure at the very
// instant of MaxDuration could see the two part, and the retry the library
// then makes go unasked; the checks set MaxElapsed only in a bubble, whose
// clock does not move meanwhile.) Out of attempts or time, Run returns
// an ExceededError, which wraps the last error. The library's own budget
// (WithBudget) is not used: the checks hand the loop its budget.
func failsafeLoop() stress.Loop {
	return stress.Loop{
		Name: "failsafe-go/retrypolicy",
		Call: func(ctx context.Context, b budget.Budget, s stress.Settings, op func(context.Context) error) error {
			tr := looptrack.NewTracker(b)
			maxAttempts := max(s.MaxAttempts, 1) // WithMaxAttempts(0) would be -1 retries: no limit
			if s.NoAttemptCap {
				maxAttempts = -1 // the library's no limit (retry.go, WithMaxAttempts)
			}
			attempts := 0
			var start time.Time
			pb := retrypolicy.NewBuilder[any]().
				WithMaxAttempts(maxAttempts).
				HandleIf(func(_ any, err error) bool {
					_, _, retryable := looptrack.Classify(err)
					return retryable
				}).
				AbortIf(func(_ any, err error) bool {
					k, _, retryable := looptrack.Classify(err)
					if !retryable {
						return false // not handled: AbortIf is not called for it
					}
					if maxAttempts > 0 && attempts >= maxAttempts || s.MaxElapsed > 0 && time.Since(start) > s.MaxElapsed {
						return false // the policy gives up now: no retry to ask for
					}
					return !tr.Retry(k)
				}).
				WithDelayFunc(func(exec failsafe.ExecutionAttempt[any]) time.Duration {
					if _, delay, _ := looptrack.Classify(exec.LastError()); delay > 0 {
						return delay
					}
					return -1 // the backoff
				})
			if s.FixedDelay {
				pb = pb.WithDelay(s.BaseDelay)
			} else {
				pb = pb.WithBackoff(s.BaseDelay, s.MaxDelay)
			}
			if s.MaxElapsed > 0 {
				pb = pb.WithMaxDuration(s.MaxElapsed)
			}
			start = time.Now()
			err := failsafe.With[any](pb.Build()).WithContext(ctx).Run(func() error {
				attempts++
				tr.Begin()
				err := op(ctx)
				if err == nil {
					tr.Success()
					return nil
				}
				k, _, retryable := looptrack.Classify(err)
				if !retryable {
					k = budget.FirstAttempt
				}
				tr.Failed(k)
				return err
			})
			tr.Finish(ctx)
			return err
		},
		Skip: map[string]string{
			"HedgeLosersCancelled": "does not hedge: a retry policy runs one attempt at a time (its hedging is hedgepolicy, another policy)",
		},
	}
}

// failsafe-go v0.9.8's retry policy through the loop checks.
func TestFailsafeRetryLoop(t *testing.T) {
	looptrack.CheckLoop(t, failsafeLoop(), failsafeExpected, failsafeExpectedSays)
}

// failsafeExpected lists the checks the retry policy (v0.9.8) does not
// pass, and why, from its source (retrypolicy/retryexecutor.go, func
// (*executor).Apply). A change means the library (or a check) changed:
// look again before updating this list.
var failsafeExpected = map[string]string{
	// Apply's loop calls innerFn, the attempt, first, and looks at the
	// context (IsCanceledWithResult) only after it has returned; nothing
	// before it (executor.go, func (*executor).execute) looks either: a
	// call whose context is already cancelled makes one attempt, and then
	// returns context.Canceled.
	"NoAttemptOnDoneContext": "fail",
	// getDelay bounds the wait by MaxDuration only (adjustForMaxDuration),
	// never by the context's deadline, and Apply selects on its timer and
	// exec.Canceled(): told to wait until the deadline, it waits into it,
	// and returns there, InitializeRetry finding the context done. (When
	// its timer fires at the deadline's instant before the context's own
	// timer has run, InitializeRetry finds the context live, and it
	// attempts again.)
	"GiveUpBeforeDeadline": "fail",
	// OnFailure gives up when ElapsedTime() > maxDuration, strictly, and
	// getDelay cuts the wait to maxDuration-elapsed: the last wait ends at
	// the limit's instant exactly, an attempt that takes no time fails
	// there, elapsed equals the limit and is not past it, and the next
	// wait is cut to zero, again and again, at an instant a bubble's clock
	// never leaves. (Out of a bubble the clock moves during the attempt,
	// and the next failure is past the limit: the loop ends.)
	"MaxElapsedEndsTheLoop": "fail",
	// getDelay takes the DelayFunc's delay as it is (ComputeDelay): the
	// maxDelay of WithBackoff caps only the backoff
	// (getFixedOrRandomDelay), and failsafehttp.DelayFunc caps no
	// Retry-After either, so Apply waits the hour a server asks for, with
	// MaxDelay 2s. (The context ends its wait, so CappedByTimeLeft holds.)
	"ServerDelayCapped": "fail",
	// Skipped: the library does not hedge (see Skip).
	"HedgeLosersCancelled": "skip",
}

// failsafeExpectedSays is what a pinned failure must say.
var failsafeExpectedSays = map[string]string{
	"NoAttemptOnDoneContext": "made 1 attempts on a context that was already cancelled",
	"GiveUpBeforeDeadline":   "told to wait 3s with 3s left",
	"MaxElapsedEndsTheLoop":  "made 1000 attempts at one instant, 5s into the call",
	"ServerDelayCapped":      "waited 1h0m0s for a server delay of 1h; want at most MaxDelay 2s",
}
