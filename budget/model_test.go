package budget_test

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/seqcheck"
	"github.com/retrybudget/retrybudget/model"
)

// The sequential checks: each reference budget, on a manual clock, answers
// every Retry exactly as its model does. Run with -rapid.checks=2000 for the
// acceptance level; the default is 100.

func TestTokenBucketMatchesModel(t *testing.T) {
	var stats seqcheck.Stats
	rapid.Check(t, func(t *rapid.T) {
		m := seqcheck.DrawTokenBucket(t, true)
		seqcheck.Check(t, seqcheck.Subject[model.TokenBucketState]{
			Model: m,
			New: func(c budget.Clock) budget.Budget {
				b, err := budget.NewTokenBucket(seqcheck.TokenBucketConfig(m, c))
				return must(t, b, err)
			},
			Timing: seqcheck.TokenBucketTiming(m),
		}, &stats)
	})
	checkCoverage(t, &stats)
}

func TestRatioMatchesModel(t *testing.T) {
	var stats seqcheck.Stats
	rapid.Check(t, func(t *rapid.T) {
		m := seqcheck.DrawRatio(t)
		seqcheck.Check(t, seqcheck.Subject[model.RatioState]{
			Model: m,
			New: func(c budget.Clock) budget.Budget {
				b, err := budget.NewRatio(seqcheck.RatioConfig(m, c))
				return must(t, b, err)
			},
			Timing: seqcheck.RatioTiming(m),
		}, &stats)
	})
	checkCoverage(t, &stats)
}

// The same with a Reserve (Finagle's and tower's kind), which DrawRatio
// leaves at 0: from none to more than the floors it draws.
func TestRatioWithReserveMatchesModel(t *testing.T) {
	var stats seqcheck.Stats
	rapid.Check(t, func(t *rapid.T) {
		m := seqcheck.DrawRatio(t)
		m.Reserve = rapid.Int64Range(0, 8).Draw(t, "reserve")
		seqcheck.Check(t, seqcheck.Subject[model.RatioState]{
			Model: m,
			New: func(c budget.Clock) budget.Budget {
				b, err := budget.NewRatio(seqcheck.RatioConfig(m, c))
				return must(t, b, err)
			},
			Timing: seqcheck.RatioTiming(m),
		}, &stats)
	})
	checkCoverage(t, &stats)
}

func TestThrottleMatchesModel(t *testing.T) {
	var stats seqcheck.Stats
	rapid.Check(t, func(t *rapid.T) {
		m := seqcheck.DrawThrottle(t)
		seqcheck.Check(t, seqcheck.Subject[model.ThrottleState]{
			Model: m,
			New: func(budget.Clock) budget.Budget {
				b, err := budget.NewThrottle(float64(m.Max)/1000, float64(m.Ratio)/1000)
				return must(t, b, err)
			},
		}, &stats)
	})
	checkCoverage(t, &stats)
}

// must fails t when a constructor rejected parameters its model accepts.
func must[B budget.Budget](t *rapid.T, b B, err error) budget.Budget {
	if err != nil {
		t.Fatalf("constructor rejected parameters its model accepts: %v", err)
	}
	return b
}

// checkCoverage fails t unless the check saw both granted and denied
// retries in good number: a check that never reaches a threshold proves
// nothing about it.
func checkCoverage(t *testing.T, s *seqcheck.Stats) {
	t.Helper()
	g, d := s.Granted.Load(), s.Denied.Load()
	t.Logf("retries granted %d, denied %d", g, d)
	least := int64(100)
	if testing.Short() {
		least = 10 // rapid makes a fifth of its checks under -short
	}
	if g < least || d < least {
		t.Errorf("the check saw %d granted and %d denied retries; want at least %d of each", g, d, least)
	}
}

// The model mirrors the budget's Kind values, so that the harness can convert
// between them.
func TestKindsMatchModel(t *testing.T) {
	pairs := []struct {
		b budget.Kind
		m model.Kind
	}{{budget.FirstAttempt, model.FirstAttempt}, {budget.Transient, model.Transient}, {budget.Throttled, model.Throttled}}
	for _, p := range pairs {
		if uint8(p.b) != uint8(p.m) || p.b.String() != p.m.String() {
			t.Errorf("budget.%v = %d, model.%v = %d; want equal", p.b, p.b, p.m, p.m)
		}
	}
}
