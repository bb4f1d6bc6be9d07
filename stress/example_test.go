package stress_test

import (
	"context"
	"fmt"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
	"github.com/retrybudget/retrybudget/stress"
)

// Hammer a budget from 64 goroutines and check the token bucket's
// conservation invariant on the log. Run it under go test -race.
func ExampleStress() {
	run, err := stress.Stress(context.Background(), stress.Config{Goroutines: 64, Ops: 50}, func(budget.Clock) budget.Budget {
		b, _ := budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
		return b
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(run.Goroutines, "goroutines; invariant:", run.CheckTokenBucket(model.AWS()))
	// Output: 64 goroutines; invariant: <nil>
}
