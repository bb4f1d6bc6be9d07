// Package retrygo is the adapter of avast/retry-go/v4's retry.Do to the
// loop checks, in a package of its own so that modules holding different
// versions of the library run the same adapter.
package retrygo

import (
	"context"
	"time"

	"github.com/avast/retry-go/v4"

	"example.com/looptrack"
	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/stress"
)

// Loop runs one call of avast/retry-go/v4's retry.Do, configured
// from the Settings with its options: Context, Attempts(MaxAttempts, or 0,
// the library's "until success", for NoAttemptCap),
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
// is not retried. The same adapter serves every version of the library
// from v4.3.2 on: testdata/loops runs it at the current version, and
// retrygo432 at v4.3.2, whose no-cap mode (Attempts(0)) calls neither
// RetryIf nor IsRecoverable (retry.go, func Do).
func Loop() stress.Loop {
	return stress.Loop{
		Name: "avast/retry-go.Do",
		Call: func(ctx context.Context, b budget.Budget, s stress.Settings, op func(context.Context) error) error {
			tr := looptrack.NewTracker(b)
			attempts := 0
			var base retry.DelayTypeFunc
			maxAttempts := uint(s.MaxAttempts)
			if s.NoAttemptCap {
				maxAttempts = 0 // the library's "until success" (options.go, Attempts)
			}
			opts := []retry.Option{
				retry.Context(ctx),
				retry.Attempts(maxAttempts),
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
					if _, delay, _ := looptrack.Classify(err); delay > 0 {
						return delay
					}
					return base(n, err, c)
				}),
				retry.RetryIf(func(err error) bool {
					k, _, retryable := looptrack.Classify(err)
					if !retryable {
						return false
					}
					if maxAttempts > 0 && attempts >= int(maxAttempts) {
						return true // Do gives up now: no retry to ask for
					}
					return tr.Retry(k)
				}),
			)
			err := retry.Do(func() error {
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
			}, opts...)
			tr.Finish(ctx)
			return err
		},
		Skip: map[string]string{
			"MaxElapsedEndsTheLoop": "retry-go has no elapsed-time limit: a call ends by its Attempts or its Context only (options.go)",
			"HedgeLosersCancelled":  "does not hedge: retry.Do runs one attempt at a time (retry.go)",
		},
	}
}
