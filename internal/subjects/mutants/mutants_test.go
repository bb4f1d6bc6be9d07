package mutants_test

import (
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/seqcheck"
	"github.com/retrybudget/retrybudget/internal/subjects/mutants"
	"github.com/retrybudget/retrybudget/model"
)

// Each test shows the sequential check failing on a mutant, and says what it
// reported. The message must name the operation whose answer differed.

func TestSequentialCatchesUnclampedRefund(t *testing.T) {
	report := seqcheck.ExpectFailure(t, func(t *rapid.T) {
		m := seqcheck.DrawTokenBucket(t, false)
		seqcheck.Check(t, seqcheck.Subject[model.TokenBucketState]{
			Model: m,
			New:   func(budget.Clock) budget.Budget { return mutants.NewUnclampedRefund(m) },
		}, nil)
	})
	expectMismatch(t, report)
}

func TestSequentialCatchesFloorAdded(t *testing.T) {
	report := seqcheck.ExpectFailure(t, func(t *rapid.T) {
		m := seqcheck.DrawRatio(t)
		seqcheck.Check(t, seqcheck.Subject[model.RatioState]{
			Model:  m,
			New:    func(c budget.Clock) budget.Budget { return mutants.NewFloorAdded(m, c) },
			Timing: seqcheck.RatioTiming(m),
		}, nil)
	})
	expectMismatch(t, report)
}

func TestSequentialCatchesThresholdOffByOne(t *testing.T) {
	report := seqcheck.ExpectFailure(t, func(t *rapid.T) {
		m := seqcheck.DrawThrottle(t)
		seqcheck.Check(t, seqcheck.Subject[model.ThrottleState]{
			Model: m,
			New:   func(budget.Clock) budget.Budget { return mutants.NewThresholdOffByOne(m) },
		}, nil)
	})
	expectMismatch(t, report)
}

// The ratio mutants share a window implementation; without a bug it must
// pass, so that a mutant's failure can only come from its bug.
func TestCorrectRatioPassesSequential(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		m := seqcheck.DrawRatio(t)
		seqcheck.Check(t, seqcheck.Subject[model.RatioState]{
			Model:  m,
			New:    func(c budget.Clock) budget.Budget { return mutants.NewCorrectRatio(m, c) },
			Timing: seqcheck.RatioTiming(m),
		}, nil)
	})
}

func expectMismatch(t *testing.T, report string) {
	t.Helper()
	if !strings.Contains(report, "retry(") || !strings.Contains(report, ", want ") {
		t.Fatalf("the check failed, but not by a differing retry answer:\n%s", report)
	}
	// Show the shrunk counterexample: the first lines of rapid's report.
	lines := strings.SplitN(report, "\n", 12)
	t.Logf("caught:\n%s", strings.Join(lines[:min(len(lines), 11)], "\n"))
}
