package linearizability

import (
	"context"
	"slices"
	"testing"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/sched"
	"github.com/retrybudget/retrybudget/model"
)

// The exhaustive search of the Linearizable check on the reference
// TokenBucket as cmd/budgetcheck rewrites it: every schedule with at most
// two preemptions of 2 goroutines × 3 operations at the last retries, each
// history checked against the model. It reports the schedules a search
// runs and how many it runs a second. It needs the rewritten code:
//
//	go run ./cmd/budgetcheck -run '^$' -bench Exhaust ./linearizability -instrument ./budget
//
// (make bench-instrumented runs it, after BenchmarkRetrySuccess on the
// rewritten budget beside the AWS SDK's quota in the same binary).
func BenchmarkExhaust(b *testing.B) {
	if !sched.Instrumented() {
		b.Skip("needs the budget rewritten: go run ./cmd/budgetcheck -run '^$' -bench Exhaust ./linearizability -instrument ./budget")
	}
	m := model.AWS()
	s := Scenario{
		// 500 tokens, less 35 transient retries: 10 left, so that the
		// goroutines' retries meet at the last one.
		Before: slices.Repeat([]model.Op{model.OpRetry(model.Transient)}, 35),
		Goroutines: [][]model.Op{
			{model.OpRetry(model.Transient), model.OpSuccess(model.FirstAttempt), model.OpRetry(model.Throttled)},
			{model.OpRetry(model.Transient), model.OpRetry(model.Transient), model.OpSuccess(model.Transient)},
		},
	}
	newBudget := func(budget.Clock) budget.Budget {
		tb, err := budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
		if err != nil {
			b.Fatal(err)
		}
		return tb
	}
	b.ReportAllocs()
	var schedules int
	for b.Loop() {
		rep, err := exhaust(context.Background(), s, newBudget, preemptionBound, 0, false,
			func(h model.History, _ sched.Report) bool {
				if r := Check(m, h, 0); r.Verdict != Linearizable {
					b.Fatalf("the reference TokenBucket: %v", r.Explain())
				}
				return false
			})
		if err != nil || !rep.Complete {
			b.Fatalf("exhaust = %+v, %v", rep, err)
		}
		schedules = rep.Schedules
	}
	b.ReportMetric(float64(schedules), "schedules/op")
	b.ReportMetric(float64(schedules*b.N)/b.Elapsed().Seconds(), "schedules/s")
}
