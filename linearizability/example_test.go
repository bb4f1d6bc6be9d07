package linearizability_test

import (
	"context"
	"fmt"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/linearizability"
	"github.com/retrybudget/retrybudget/model"
)

// Two retries that overlap in time, both granted, from a bucket that holds
// one retry's worth: no order of the two explains it.
func ExampleCheck() {
	m := model.TokenBucket{Capacity: 14_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000}
	h := model.History{
		{Client: 1, Op: model.OpRetry(model.Transient), Granted: true, Call: 1, Return: 4},
		{Client: 2, Op: model.OpRetry(model.Transient), Granted: true, Call: 2, Return: 3},
	}
	r := linearizability.Check(m, h, 10*time.Second)
	fmt.Println(r.Verdict)
	fmt.Println(r.Stuck[0].Operation, "but the model answers granted:", r.Stuck[0].ModelGranted)
	// Output:
	// violation
	// [2,3] g2 retry(transient) -> granted but the model answers granted: false
}

// Record a concurrent run of a reference budget, from a scenario written by
// hand, and check it against the model.
func ExampleRecord() {
	retries := []model.Op{model.OpRetry(model.Transient), model.OpSuccess(model.Transient), model.OpRetry(model.Throttled)}
	s := linearizability.Scenario{Goroutines: [][]model.Op{retries, retries, retries, retries}}
	h, err := linearizability.Record(context.Background(), s, func(budget.Clock) budget.Budget {
		b, _ := budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
		return b
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	r := linearizability.Check(model.AWS(), h, 10*time.Second)
	fmt.Println(len(r.History), "operations:", r.Verdict)
	// Output: 12 operations: linearizable
}
