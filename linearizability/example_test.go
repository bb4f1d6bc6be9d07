package linearizability_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/linearizability"
	"github.com/retrybudget/retrybudget/model"
)

// Two retries that overlap in time, both granted, from a bucket that holds
// one retry's worth: no order of the two explains it.
func ExampleCheck() {
	m := model.TokenBucket{Capacity: 14_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000}
	h := linearizability.History{
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

// Record a concurrent run of a reference budget and check it.
func ExampleTrial() {
	m := model.AWS()
	sub := linearizability.Subject[model.TokenBucketState]{
		Model: m,
		New: func(budget.Clock) budget.Budget {
			b, _ := budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
			return b
		},
	}
	s := linearizability.Generate(rand.New(rand.NewPCG(1, 2)), linearizability.GenConfig{Goroutines: 4, Ops: 50})
	r, err := linearizability.Trial(context.Background(), sub, s, 10*time.Second)
	fmt.Println(len(r.History), "operations:", r.Verdict, err)
	// Output: 200 operations: linearizable <nil>
}
