package loops

import (
	"context"
	"testing"
	"time"

	"github.com/avast/retry-go/v4"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/stress"
)

// retryGoLoop runs one call of avast/retry-go/v4's retry.Do, configured
// from the Settings with its options: Context, Attempts(MaxAttempts),
// Delay(BaseDelay), MaxDelay(MaxDelay) (which caps every wait, a server
// delay included), LastErrorOnly, and a DelayType: FixedDelay for
// FixedDelay, BackOffDelay (BaseDelay×2^(n-1)) for NoJitter, and else the
// library's default, CombineDelay(BackOffDelay, RandomDelay), with
// MaxJitter(BaseDelay). The DelayType returns a *stress.RetryAfterError's
// delay instead, as the library's example of a delay based on the error
// (examples/delay_based_on_error_test.go) does.
//
// The budget is asked in RetryIf, which Do calls after every failure,
// before it looks at its attempts; a denial is false, after which Do
// returns. RetryIf is called after the last attempt's failure too, so the
// adapter, which counts the attempts, asks only when an attempt is left:
// Do gives up after Attempts whatever RetryIf says. RetryIf is also the
// classifier (it replaces the default, IsRecoverable): the permanent error
// is not retried.
func retryGoLoop() stress.Loop {
	return stress.Loop{
		Name: "avast/retry-go.Do",
		Call: func(ctx context.Context, b budget.Budget, s stress.Settings, op func(context.Context) error) error {
			tr := newTracker(b)
			attempts := 0
			var base retry.DelayTypeFunc
			opts := []retry.Option{
				retry.Context(ctx),
				retry.Attempts(uint(s.MaxAttempts)),
				retry.Delay(s.BaseDelay),
				retry.MaxDelay(s.MaxDelay),
				retry.LastErrorOnly(true),
			}
			switch {
			case s.FixedDelay:
				base = retry.FixedDelay
			case s.NoJitter || s.BaseDelay <= 0: // RandomDelay panics on a MaxJitter of 0
				base = retry.BackOffDelay
			default:
				base = retry.CombineDelay(retry.BackOffDelay, retry.RandomDelay)
				opts = append(opts, retry.MaxJitter(s.BaseDelay))
			}
			opts = append(opts,
				retry.DelayType(func(n uint, err error, c *retry.Config) time.Duration {
					if _, delay, _ := classify(err); delay > 0 {
						return delay
					}
					return base(n, err, c)
				}),
				retry.RetryIf(func(err error) bool {
					k, _, retryable := classify(err)
					if !retryable {
						return false
					}
					if attempts >= s.MaxAttempts {
						return true // Do gives up now: no retry to ask for
					}
					return tr.retry(k)
				}),
			)
			err := retry.Do(func() error {
				attempts++
				tr.begin()
				err := op(ctx)
				if err == nil {
					tr.success()
					return nil
				}
				k, _, retryable := classify(err)
				if !retryable {
					k = budget.FirstAttempt
				}
				tr.failed(k)
				return err
			}, opts...)
			tr.finish(ctx)
			return err
		},
		Skip: map[string]string{
			"MaxElapsedEndsTheLoop": "retry-go has no elapsed-time limit: a call ends by its Attempts or its Context only (options.go)",
		},
	}
}

// avast/retry-go/v4 v4.7.0's retry.Do through the loop checks.
func TestRetryGoLoop(t *testing.T) {
	checkLoop(t, retryGoLoop(), retryGoExpected, retryGoExpectedSays)
}

// retryGoExpected lists the checks retry.Do (v4.7.0) does not pass, and
// why, from its source (retry.go, func DoWithData). A change means the
// library (or a check) changed: look again before updating this list.
var retryGoExpected = map[string]string{
	// DoWithData looks at its context once, before the first attempt.
	// After a failure it selects on config.timer.After(delay) and
	// config.context.Done(), and calls retryableFunc again with no look at
	// the context: with a zero delay both are ready when the caller has
	// cancelled during the attempt, select picks either, and about half
	// the time it attempts again after the cancel.
	"NoAttemptAfterCancel": "fail",
	// The same select at a wait that ends at the deadline's instant: the
	// next attempt runs on an expired context (about 3 trials in 4).
	"NoAttemptOnExpiredDeadline": "fail",
	// DoWithData never compares the delay with the context's deadline:
	// told to wait until the deadline, it waits into it, and often
	// attempts again at its instant.
	"GiveUpBeforeDeadline": "fail",
	// Skipped: the library has no elapsed-time limit (see Skip).
	"MaxElapsedEndsTheLoop": "skip",
}

// retryGoExpectedSays is what a pinned failure must say.
var retryGoExpectedSays = map[string]string{
	"NoAttemptAfterCancel":       "after the caller cancelled during the first; want none",
	"NoAttemptOnExpiredDeadline": "attempted on an expired context in",
	"GiveUpBeforeDeadline":       "told to wait 3s with 3s left",
}
