package stress_test

import (
	"context"
	"fmt"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/stress"
)

// An adapter runs one call of a retry loop, configured from the check's
// Settings, with the budget and the operation the check supplies. This one
// is for budget.Retrier; stress.RetrierLoop returns the same. Pass it to
// budgettest.RunLoop from a test.
func ExampleLoop() {
	loop := stress.Loop{
		Name: "budget.Retrier",
		Call: func(ctx context.Context, b budget.Budget, s stress.Settings, op func(context.Context) error) error {
			r := &budget.Retrier{Budget: b, MaxAttempts: s.MaxAttempts, BaseDelay: s.BaseDelay, MaxDelay: s.MaxDelay, MaxElapsed: s.MaxElapsed}
			return r.Do(ctx, func(ctx context.Context, _ budget.Attempt) error { return op(ctx) })
		},
	}
	calls := 0
	err := loop.Call(context.Background(), nil, stress.Settings{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond},
		func(context.Context) error { calls++; return nil })
	fmt.Println(calls, err)
	// Output: 1 <nil>
}
