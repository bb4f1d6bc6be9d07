package linearizability

import (
	"slices"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/model"
)

// scenarioOf is a scenario of n retries on one goroutine: scenarios that
// narrow tells apart by their length.
func scenarioOf(n int) Scenario {
	return Scenario{Goroutines: [][]model.Op{slices.Repeat([]model.Op{model.OpRetry(model.Transient)}, n)}}
}

// fakeElapsed is a clock that moves by step every time it is read.
func fakeElapsed(step time.Duration) func() time.Duration {
	var now time.Duration
	return func() time.Duration {
		d := now
		now += step
		return d
	}
}

// Narrowing gives three tries in four to the first focused scenario and the
// fourth to the last, and keeps the first that fails again.
func TestNarrowTriesFirstThreeTimesThenLast(t *testing.T) {
	first, mid, last, orig := scenarioOf(1), scenarioOf(2), scenarioOf(3), scenarioOf(9)
	var tried []int
	witness := Result[model.TokenBucketState]{Verdict: Violation, Elapsed: time.Millisecond}
	fails := func(c Scenario) (Result[model.TokenBucketState], bool) {
		tried = append(tried, c.len())
		return witness, c.len() == last.len() && len(tried) > 4
	}
	got, w := narrow([]Scenario{first, mid, last}, orig, Result[model.TokenBucketState]{}, time.Hour, fakeElapsed(time.Millisecond), fails)
	if want := []int{1, 1, 1, 3, 1, 1, 1, 3}; !slices.Equal(tried, want) {
		t.Errorf("tried scenarios of lengths %v, want %v", tried, want)
	}
	if got.len() != last.len() || w.Elapsed != witness.Elapsed {
		t.Errorf("narrow returned a scenario of %d operations (witness %v), want the last focus, of %d, and its witness", got.len(), w.Elapsed, last.len())
	}
}

// Narrowing stops when its time is up and then returns the violation it was
// given; with nothing focused it runs nothing.
func TestNarrowStopsInTime(t *testing.T) {
	orig := scenarioOf(9)
	res := Result[model.TokenBucketState]{Verdict: Violation, Elapsed: 7}
	runs := 0
	never := func(Scenario) (Result[model.TokenBucketState], bool) {
		runs++
		return Result[model.TokenBucketState]{}, false
	}
	// The clock reads 0, 1, 2, ... ms: reads below 75 ms allow a run.
	got, w := narrow([]Scenario{scenarioOf(1)}, orig, res, 75*time.Millisecond, fakeElapsed(time.Millisecond), never)
	if runs != 75 {
		t.Errorf("%d runs in 75 ms at 1 ms a run, want 75", runs)
	}
	if got.len() != orig.len() || w.Elapsed != res.Elapsed {
		t.Errorf("narrow returned a scenario of %d operations, want the original of %d and its result", got.len(), orig.len())
	}
	runs = 0
	got, _ = narrow(nil, orig, res, time.Hour, fakeElapsed(time.Millisecond), never)
	if runs != 0 || got.len() != orig.len() {
		t.Errorf("with no focused scenario: %d runs and %d operations, want 0 runs and the original", runs, got.len())
	}
}

func TestMinimizeTriesAndBudget(t *testing.T) {
	for _, c := range []struct{ n, want int }{{0, 4000}, {1, 4000}, {3, 1333}, {100, 40}, {200, 20}, {400, 20}, {100_000, 20}} {
		if got := minimizeTries(c.n); got != c.want {
			t.Errorf("minimizeTries(%d) = %d, want %d", c.n, got, c.want)
		}
	}
	for _, c := range []struct{ within, spent, want time.Duration }{
		{6 * time.Second, 0, 6 * time.Second},
		{6 * time.Second, 2 * time.Second, 4 * time.Second},
		{6 * time.Second, 5900 * time.Millisecond, time.Second / 2},
		{6 * time.Second, time.Minute, time.Second / 2},
	} {
		if got := minimizeBudget(c.within, c.spent); got != c.want {
			t.Errorf("minimizeBudget(%v, %v) = %v, want %v", c.within, c.spent, got, c.want)
		}
	}
}

// A minimization that found nothing smaller says so, rather than
// "minimized from 400 to 400 operations".
func TestShrunkFromSaysWhenNothingShrank(t *testing.T) {
	if got := shrunkFrom(400, 400, 1500*time.Millisecond); got != "400 operations; no smaller failing scenario was found in 1.5s" {
		t.Errorf("shrunkFrom(400, 400) = %q", got)
	}
	if got := shrunkFrom(27, 6, 265*time.Millisecond); got != "minimized from 27 to 6 operations in 265ms" {
		t.Errorf("shrunkFrom(27, 6) = %q", got)
	}
}

// withoutQuiet drops the operations of a prefix after which the model is
// where it was (the retries a drained bucket denies, a clock step that
// refills nothing: this model has no refill), and keeps the rest in order; minimize tries such a
// candidate first and keeps it when it still fails.
func TestQuietOperationsLeaveAMinimizedHistory(t *testing.T) {
	m := model.TokenBucket{Capacity: 2_000, TransientCost: 1_000, ThrottledCost: 500, SuccessBonus: 100}
	retry, success := model.OpRetry(model.Transient), model.OpSuccess(model.Transient)
	before := []model.Op{retry, retry, retry, retry, model.OpAdvance(time.Second), success, retry, retry}
	s := Scenario{Before: before, Goroutines: [][]model.Op{{retry}, {success}}}
	got, ok := withoutQuiet(m, s)
	want := []model.Op{retry, retry, success, retry} // the success refunds a retry's cost
	if !ok || !slices.Equal(got.Before, want) || len(got.Goroutines) != 2 || !slices.Equal(s.Before, before) {
		t.Fatalf("withoutQuiet = %v, %v; want prefix %v, the goroutines kept and s untouched", got.Before, ok, want)
	}
	if _, ok := withoutQuiet(m, got); ok {
		t.Errorf("withoutQuiet found quiet operations in %v", got.Before)
	}
	// The failure needs the two goroutines and the success in the prefix
	// only: minimize keeps the candidate, and shrinks on from it.
	var tried []Scenario
	fails := func(c Scenario) (int, bool) {
		tried = append(tried, c)
		return 0, len(c.Goroutines) == 2 && len(c.Goroutines[0])*len(c.Goroutines[1]) > 0 && slices.Contains(c.Before, success)
	}
	rep := minimize(s, 1, 0, fails, got)
	if !slices.Equal(rep.To.Before, []model.Op{success}) || len(rep.To.Goroutines) != 2 {
		t.Errorf("minimize = %v, want the prefix [success] and both goroutines", rep.To)
	}
	if len(tried) < 2 || !slices.Equal(tried[1].Before, want) {
		t.Errorf("minimize did not try the candidate right after the scenario itself: %v", tried)
	}
	// A candidate that does not fail is not kept.
	rep = minimize(s, 1, 0, func(c Scenario) (int, bool) { return 0, len(c.Before) == len(before) }, got)
	if len(rep.To.Before) != len(before) {
		t.Errorf("minimize kept a candidate that does not fail: %v", rep.To)
	}
}
