package instrumented_test

import (
	"context"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"

	"github.com/retrybudget/retrybudget/budget"
	ibudget "github.com/retrybudget/retrybudget/internal/instrumented/budget"
	"github.com/retrybudget/retrybudget/linearizability"
	"github.com/retrybudget/retrybudget/model"
	"github.com/retrybudget/retrybudget/yield"
)

// The retry/success loop of budget's BenchmarkRetrySuccess, on the plain
// TokenBucket, on the instrumented copy (outside a controlled run, where
// every hook is a load of the active run and a branch), and on the AWS
// SDK's retry quota, in one binary:
//
//	go test -run '^$' -bench Instrumented -cpu 1,2 ./internal/instrumented
func BenchmarkInstrumented(b *testing.B) {
	b.Run("TokenBucket", func(b *testing.B) {
		bud, _ := budget.NewTokenBucket(budget.DefaultTokenBucketConfig())
		loop(b, bud.Request, bud.Retry, bud.Success)
	})
	b.Run("InstrumentedTokenBucket", func(b *testing.B) {
		bud, _ := ibudget.NewTokenBucket(ibudget.DefaultTokenBucketConfig())
		loop(b, bud.Request,
			func(budget.Kind) bool { return bud.Retry(ibudget.Transient) },
			func(budget.Kind) { bud.Success(ibudget.Transient) })
	})
	b.Run("AWSTokenRateLimit", func(b *testing.B) {
		rl := ratelimit.NewTokenRateLimit(500)
		ctx := context.Background()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				release, err := rl.GetToken(ctx, 14)
				if err == nil {
					_ = release()
				}
			}
		})
	})
}

func loop(b *testing.B, request func(), retry func(budget.Kind) bool, success func(budget.Kind)) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			request()
			if retry(budget.Transient) {
				success(budget.Transient)
			}
		}
	})
}

// adapted is the instrumented TokenBucket as a budget.Budget.
type adapted struct{ b *ibudget.TokenBucket }

func (a adapted) Request()                 { a.b.Request() }
func (a adapted) Retry(k budget.Kind) bool { return a.b.Retry(ibudget.Kind(k)) }
func (a adapted) Success(k budget.Kind)    { a.b.Success(ibudget.Kind(k)) }

// The exhaustive search of the Linearizable check on the reference
// TokenBucket (its instrumented copy): every schedule with at most two
// preemptions of 2 goroutines × 3 operations at the last retries, each
// history checked against the model. It reports the schedules a search
// runs and how many it runs a second:
//
//	go test -run '^$' -bench Exhaust ./internal/instrumented
func BenchmarkExhaust(b *testing.B) {
	m := model.AWS()
	s := linearizability.Scenario{
		// 500 tokens, less 35 transient retries: 10 left, so that the
		// goroutines' retries meet at the last one.
		Before: slices.Repeat([]model.Op{model.OpRetry(model.Transient)}, 35),
		Goroutines: [][]model.Op{
			{model.OpRetry(model.Transient), model.OpSuccess(model.FirstAttempt), model.OpRetry(model.Throttled)},
			{model.OpRetry(model.Transient), model.OpRetry(model.Transient), model.OpSuccess(model.Transient)},
		},
	}
	newBudget := func(budget.Clock) budget.Budget {
		tb, err := ibudget.NewTokenBucket(ibudget.DefaultTokenBucketConfig())
		if err != nil {
			b.Fatal(err)
		}
		return adapted{tb}
	}
	b.ReportAllocs()
	var schedules int
	for b.Loop() {
		rep, err := linearizability.Exhaust(context.Background(), s, newBudget, linearizability.DefaultPreemptionBound, 0,
			func(h linearizability.History, _ yield.Report) bool {
				if r := linearizability.Check(m, h, 0); r.Verdict != linearizability.Linearizable {
					b.Fatalf("the reference TokenBucket: %v", r.Explain())
				}
				return false
			})
		if err != nil || !rep.Complete {
			b.Fatalf("Exhaust = %+v, %v", rep, err)
		}
		schedules = rep.Schedules
	}
	b.ReportMetric(float64(schedules), "schedules/op")
	b.ReportMetric(float64(schedules*b.N)/b.Elapsed().Seconds(), "schedules/s")
}
