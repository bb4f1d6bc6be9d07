package linearizability_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/internal/seqcheck"
	"github.com/retrybudget/retrybudget/linearizability"
	"github.com/retrybudget/retrybudget/model"
)

var scenarios = flag.Int("scenarios", 20, "scenarios per reference budget in TestReferenceBudgetsAreLinearizable (the acceptance level is 200)")

const checkTimeout = 20 * time.Second

// Reference budgets, built from model parameters that make boundaries
// frequent: small buckets, short windows.

func tokenBucket(m model.TokenBucket) linearizability.Subject[model.TokenBucketState] {
	tm := seqcheck.TokenBucketTiming(m)
	return linearizability.Subject[model.TokenBucketState]{
		Model: m,
		New:   seqcheck.NewTokenBucket(m),
		Gen:   linearizability.GenConfig{Scale: tm.Scale, Horizon: tm.Horizon},
	}
}

func ratio(m model.Ratio) linearizability.Subject[model.RatioState] {
	tm := seqcheck.RatioTiming(m)
	return linearizability.Subject[model.RatioState]{
		Model: m,
		New:   seqcheck.NewRatio(m),
		Gen:   linearizability.GenConfig{Scale: tm.Scale, Horizon: tm.Horizon},
	}
}

func throttle(m model.Throttle) linearizability.Subject[model.ThrottleState] {
	return linearizability.Subject[model.ThrottleState]{
		Model: m,
		New:   seqcheck.NewThrottle(m),
	}
}

var (
	smallBucket  = model.TokenBucket{Capacity: 50_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000}
	refillBucket = model.TokenBucket{Capacity: 30_000, TransientCost: 14_000, ThrottledCost: 5_000, SuccessBonus: 1_000, RefillPerSecond: 10_000}
	shortRatio   = model.Ratio{PPM: 100_000, Window: 10 * time.Second, Slots: 10, Floor: 3}
	grpcThrottle = model.Throttle{Max: 10_000, Ratio: 500}
)

// checkMany records and checks n scenarios drawn from seeds 1..n, and fails
// on every violation or inconclusive check.
func checkMany[S any](t *testing.T, sub linearizability.Subject[S], n int) {
	t.Helper()
	spec, _ := linearizability.Spec(sub.Model)
	var longest time.Duration
	for seed := range uint64(n) {
		s := linearizability.Generate(rand.New(rand.NewPCG(seed+1, 0)), sub.Gen)
		r, err := linearizability.Trial(context.Background(), sub, s, checkTimeout)
		if err != nil {
			t.Fatalf("seed %d: %v", seed+1, err)
		}
		longest = max(longest, r.Elapsed)
		switch r.Verdict {
		case linearizability.Linearizable:
		case linearizability.Inconclusive:
			t.Errorf("seed %d: %s", seed+1, r.Explain())
		default:
			linearizability.Report(t, r, spec, "reference", fmt.Sprintf("%s-seed%d", t.Name(), seed+1))
			t.Errorf("seed %d: a reference budget is not linearizable", seed+1)
		}
	}
	t.Logf("%d scenarios of %d operations each, all linearizable; slowest check %v", n, linearizability.Generate(rand.New(rand.NewPCG(1, 0)), sub.Gen).Len(), longest)
}

func TestReferenceBudgetsAreLinearizable(t *testing.T) {
	t.Run("TokenBucket", func(t *testing.T) { checkMany(t, tokenBucket(smallBucket), *scenarios) })
	t.Run("TokenBucketRefill", func(t *testing.T) { checkMany(t, tokenBucket(refillBucket), *scenarios) })
	t.Run("Ratio", func(t *testing.T) { checkMany(t, ratio(shortRatio), *scenarios) })
	t.Run("Throttle", func(t *testing.T) { checkMany(t, throttle(grpcThrottle), *scenarios) })
}
