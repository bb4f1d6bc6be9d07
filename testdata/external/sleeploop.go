package external

import (
	"context"
	"sync"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

// sleepStats counts SleepRetry's outcomes, for metrics.
var sleepStats struct {
	mu                  sync.Mutex
	successes, failures int
}

func countOutcome(err error) {
	sleepStats.mu.Lock()
	defer sleepStats.mu.Unlock()
	if err == nil {
		sleepStats.successes++
	} else {
		sleepStats.failures++
	}
}

// SleepRetry is a retry loop a team might write: it asks the budget before
// each retry and waits its backoff with time.Sleep, so a cancel during the
// wait is seen only when the wait is over. It keeps every other promise: it
// asks once per retry, retries only when granted, and returns at once when
// denied.
func SleepRetry(ctx context.Context, b budget.Budget, attempts int, base, most time.Duration, isRetryable func(error) bool, op func(context.Context) error) error {
	b.Request()
	kind := budget.FirstAttempt
	wait := base
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := op(ctx)
		if err == nil {
			b.Success(kind)
			countOutcome(nil)
			return nil
		}
		if !isRetryable(err) || attempt >= attempts || !b.Retry(budget.Transient) {
			countOutcome(err)
			return err
		}
		kind = budget.Transient
		time.Sleep(wait) // ignores ctx
		wait = min(2*wait, most)
	}
}
