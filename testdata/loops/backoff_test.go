package loops

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v5"

	"example.com/looptrack"
	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/stress"
)

// askingBackOff asks the budget for each retry where backoff.Retry asks its
// BackOff for the next wait: after the checks of MaxTries, of a permanent
// error and of the context, and before the wait. A denial is
// backoff.Stop, after which Retry returns the last error at once. The kind
// asked for is the last failure's, which the operation leaves in *kind.
type askingBackOff struct {
	backoff.BackOff
	tr   *looptrack.Tracker
	kind *budget.Kind
}

func (a askingBackOff) NextBackOff() time.Duration {
	if !a.tr.Retry(*a.kind) {
		return backoff.Stop
	}
	return a.BackOff.NextBackOff()
}

// backoffLoop runs one call of cenkalti/backoff/v5's backoff.Retry,
// configured from the Settings with its own options: WithMaxTries
// (MaxAttempts, or 0, the library's no limit, for NoAttemptCap), WithMaxElapsedTime (MaxElapsed; zero is no limit, as
// Settings means, rather than the library's default of 15 minutes), and an
// ExponentialBackOff (InitialInterval BaseDelay, Multiplier 2, MaxInterval
// MaxDelay, its RandomizationFactor 0 for NoJitter), or a ConstantBackOff
// of BaseDelay for FixedDelay. A permanent error travels as
// backoff.Permanent, a server delay as a *backoff.RetryAfterError (to the
// nanosecond: its Duration field, not RetryAfter's whole seconds), which
// also wraps the check's error.
func backoffLoop() stress.Loop {
	return stress.Loop{
		Name: "cenkalti/backoff.Retry",
		Call: func(ctx context.Context, b budget.Budget, s stress.Settings, op func(context.Context) error) error {
			tr := looptrack.NewTracker(b)
			var bo backoff.BackOff
			if s.FixedDelay {
				bo = backoff.NewConstantBackOff(s.BaseDelay)
			} else {
				e := backoff.NewExponentialBackOff()
				e.InitialInterval, e.Multiplier, e.MaxInterval = s.BaseDelay, 2, s.MaxDelay
				if s.NoJitter {
					e.RandomizationFactor = 0
				}
				bo = e
			}
			var kind budget.Kind
			maxTries := uint(s.MaxAttempts)
			if s.NoAttemptCap {
				maxTries = 0 // Retry's "no limit" (retry.go: MaxTries > 0 && ...)
			}
			_, err := backoff.Retry(ctx, func() (struct{}, error) {
				tr.Begin()
				err := op(ctx)
				if err == nil {
					tr.Success()
					return struct{}{}, nil
				}
				k, delay, retryable := looptrack.Classify(err)
				if !retryable {
					tr.Failed(budget.FirstAttempt)
					return struct{}{}, backoff.Permanent(err)
				}
				tr.Failed(k)
				kind = k
				if k == budget.Throttled {
					return struct{}{}, fmt.Errorf("%w: %w", &backoff.RetryAfterError{Duration: delay}, err)
				}
				return struct{}{}, err
			},
				backoff.WithBackOff(askingBackOff{bo, tr, &kind}),
				backoff.WithMaxTries(maxTries),
				backoff.WithMaxElapsedTime(s.MaxElapsed),
			)
			tr.Finish(ctx)
			return err
		},
		Skip: map[string]string{
			"HedgeLosersCancelled": "does not hedge: backoff.Retry runs one attempt at a time (retry.go, func Retry)",
		},
	}
}

// cenkalti/backoff/v5 v5.0.3's backoff.Retry through the loop checks.
func TestBackoffRetryLoop(t *testing.T) {
	looptrack.CheckLoop(t, backoffLoop(), backoffExpected, backoffExpectedSays)
}

// backoffExpected lists the checks backoff.Retry (v5.0.3) does not pass,
// and why, from its source (retry.go, func Retry). A change means the
// library (or a check) changed: look again before updating this list.
var backoffExpected = map[string]string{
	// Retry's loop calls operation() first and looks at ctx
	// (context.Cause) only after an attempt has failed: a call whose
	// context is already cancelled makes one attempt and, that attempt
	// succeeding, returns nil.
	"NoAttemptOnDoneContext": "fail",
	// After a wait, Retry selects on its timer and ctx.Done() and goes on
	// to operation() with no look at ctx: when the wait ends at the
	// deadline's instant both are ready, select picks either, and the
	// attempt runs on an expired context (about 3 trials in 4).
	"NoAttemptOnExpiredDeadline": "fail",
	// Retry compares the next wait with MaxElapsedTime only
	// (time.Since(startedAt)+next), never with ctx's deadline: told to wait
	// until the deadline, it waits into it, and, its timer and the
	// deadline's firing together, often attempts again at its instant.
	"GiveUpBeforeDeadline": "fail",
	// A *RetryAfterError replaces the wait NextBackOff gave (next =
	// retryAfter.Duration) after the BackOff has capped it at MaxInterval:
	// nothing caps a server delay, and Retry waits the hour a server asks
	// for, with MaxDelay 2s. (It looks at no deadline either, but returns
	// when ctx ends, so CappedByTimeLeft holds.)
	"ServerDelayCapped": "fail",
	// Skipped: the library does not hedge (see Skip).
	"HedgeLosersCancelled": "skip",
}

// backoffExpectedSays is what a pinned failure must say, so that it still
// fails for the reason found.
var backoffExpectedSays = map[string]string{
	"NoAttemptOnDoneContext":     "made 1 attempts on a context that was already cancelled",
	"NoAttemptOnExpiredDeadline": "attempted on an expired context in",
	"GiveUpBeforeDeadline":       "told to wait 3s with 3s left",
	"ServerDelayCapped":          "waited 1h0m0s for a server delay of 1h; want at most MaxDelay 2s",
}
