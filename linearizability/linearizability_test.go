package linearizability_test

import (
	"context"
	"flag"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/harness"
	"github.com/retrybudget/retrybudget/internal/seqcheck"
	"github.com/retrybudget/retrybudget/linearizability"
	"github.com/retrybudget/retrybudget/model"
)

var scenarios = flag.Int("scenarios", 20, "scenarios per reference budget in TestReferenceBudgetsAreLinearizable (the acceptance level is 200)")

const checkTimeout = 20 * time.Second

// A target is a budget factory with the model and timing it follows.
type target[S any] struct {
	model  model.Model[S]
	new    func(budget.Clock) budget.Budget
	timing harness.Timing
}

// Reference budgets, built from model parameters that make boundaries
// frequent: small buckets, short windows.
var (
	smallBucket  = model.TokenBucket{Capacity: 50_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000}
	refillBucket = model.TokenBucket{Capacity: 30_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000, RefillPerSecond: 10_000}
	shortRatio   = model.Ratio{PPM: 100_000, Window: 10 * time.Second, Slots: 10, Floor: 3}
	grpcThrottle = model.Throttle{Max: 10_000, Ratio: 500}
)

func tokenBucket(m model.TokenBucket) target[model.TokenBucketState] {
	return target[model.TokenBucketState]{m, seqcheck.NewTokenBucket(m), seqcheck.TokenBucketTiming(m)}
}

func ratio(m model.Ratio) target[model.RatioState] {
	return target[model.RatioState]{m, seqcheck.NewRatio(m), seqcheck.RatioTiming(m)}
}

func throttle(m model.Throttle) target[model.ThrottleState] {
	return target[model.ThrottleState]{m, seqcheck.NewThrottle(m), harness.Timing{}}
}

// scenario draws the scenario of seed: goroutines lists of ops calls, and
// ops/5 clock steps when the target reads time.
func (tg target[S]) scenario(seed uint64, goroutines, ops int) linearizability.Scenario {
	g, c := harness.Lists(harness.Rand(rand.New(rand.NewPCG(seed, 0))), goroutines, ops, ops/5, tg.timing)
	return linearizability.Scenario{Goroutines: g, Clock: c}
}

// trial records s once and checks the history.
func (tg target[S]) trial(t testing.TB, s linearizability.Scenario) linearizability.Result[S] {
	t.Helper()
	h, err := linearizability.Record(context.Background(), s, tg.new)
	if err != nil {
		t.Fatal(err)
	}
	return linearizability.Check(tg.model, h, checkTimeout)
}

// checkMany records and checks n scenarios drawn from seeds 1..n, and fails
// on every violation or inconclusive check.
func checkMany[S any](t *testing.T, tg target[S], n int) {
	t.Helper()
	var longest time.Duration
	for seed := range uint64(n) {
		r := tg.trial(t, tg.scenario(seed+1, 4, 100))
		longest = max(longest, r.Elapsed)
		if r.Verdict != linearizability.Linearizable {
			t.Errorf("seed %d: a reference budget is %v:\n%s", seed+1, r.Verdict, r.Explain())
		}
	}
	t.Logf("%d scenarios, all linearizable; slowest check %v", n, longest)
}

func TestReferenceBudgetsAreLinearizable(t *testing.T) {
	t.Run("TokenBucket", func(t *testing.T) { checkMany(t, tokenBucket(smallBucket), *scenarios) })
	t.Run("TokenBucketRefill", func(t *testing.T) { checkMany(t, tokenBucket(refillBucket), *scenarios) })
	t.Run("Ratio", func(t *testing.T) { checkMany(t, ratio(shortRatio), *scenarios) })
	t.Run("Throttle", func(t *testing.T) { checkMany(t, throttle(grpcThrottle), *scenarios) })
}

// Record returns a panic in the budget as an error naming the method.
func TestRecordReportsAPanic(t *testing.T) {
	s := linearizability.Scenario{Goroutines: [][]model.Op{{model.OpRequest, model.OpRetry(model.Transient)}}}
	_, err := linearizability.Record(context.Background(), s, func(budget.Clock) budget.Budget { return panicky{} })
	if err == nil || !contains(err.Error(), "Retry panicked on retry(transient): boom") {
		t.Fatalf("Record = %v, want the panic named", err)
	}
}

type panicky struct{}

func (panicky) Request()               {}
func (panicky) Retry(budget.Kind) bool { panic("boom") }
func (panicky) Success(budget.Kind)    {}
