package stress

import (
	"context"
	"errors"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

// RetrierLoop adapts the budget package's Retrier to the loop checks: a
// model for writing an adapter of your own. It honours every field of
// Settings, NoJitter and FixedDelay through the Retrier's Jitter hook. It
// hands the Retrier the check's budget itself, so that the Retrier sees an
// in-flight budget (EveryStartEnds) as one, and tells it of ends; an
// adapter that wraps the budget must keep its AttemptEnd and CallEnd.
func RetrierLoop() Loop {
	return Loop{
		Name: "budget.Retrier",
		Call: func(ctx context.Context, b budget.Budget, s Settings, op func(context.Context) error) error {
			r := &budget.Retrier{
				Budget:      b,
				MaxAttempts: s.MaxAttempts,
				BaseDelay:   s.BaseDelay,
				MaxDelay:    s.MaxDelay,
				MaxElapsed:  s.MaxElapsed,
				Classify: func(err error) (budget.Kind, bool) {
					if errors.Is(err, ErrPermanent) {
						return budget.FirstAttempt, false
					}
					return budget.DefaultClassifier(err)
				},
			}
			switch {
			case s.FixedDelay:
				// BaseDelay itself, zero included (the Retrier reads a
				// zero BaseDelay as its default, but the pick is ours).
				r.Jitter = func(time.Duration) time.Duration { return s.BaseDelay }
			case s.NoJitter:
				r.Jitter = func(ceiling time.Duration) time.Duration { return ceiling }
			}
			return r.Do(ctx, func(ctx context.Context, _ budget.Attempt) error { return op(ctx) })
		},
		Skip: map[string]string{
			"HedgeLosersCancelled": "the Retrier does not hedge",
			"UncappedLoopEnds":     "the Retrier always has an attempt limit (MaxAttempts, DefaultMaxAttempts when zero)",
		},
	}
}
