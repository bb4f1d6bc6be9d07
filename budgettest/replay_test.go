package budgettest_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/budgettest"
	"github.com/retrybudget/retrybudget/internal/seqcheck"
	"github.com/retrybudget/retrybudget/internal/subjects/mutants"
	"github.com/retrybudget/retrybudget/model"
)

// A budget that fails every replay is reported with its first three, not
// one and not all: enough to see a pattern, few enough to read.
func TestReplayReportsThreeFailures(t *testing.T) {
	t.Parallel()
	err := budgettest.VerifyCheck(t, budgettest.Subject[model.TokenBucketState]{Name: "generous", Model: refill,
		New: func(*testing.T, budget.Clock) budget.Budget { return generous{} }}, budgettest.CheckReplay)
	if err == nil {
		t.Fatal("Replay passed a budget that grants every retry")
	}
	if n := strings.Count(err.Error(), "generous: replay \""); n != 3 {
		t.Errorf("%d replays reported, want 3:\n%v", n, err)
	}
}

// shiftedRatio is the reference ratio on a clock read by nanoseconds off:
// the off-by-one of a slot computed as (now+1)/width (an "inclusive end"),
// or as (now-1)/width. Only an instant one nanosecond beside a slot
// boundary lands in the wrong slot.
func shiftedRatio(m model.Ratio, by time.Duration) budgettest.Factory {
	return func(_ *testing.T, c budget.Clock) budget.Budget {
		return seqcheck.NewRatio(m)(budget.ClockFunc(func() time.Duration { return c.Now() + by }))
	}
}

// Replay makes calls on the slot boundaries and a nanosecond either side of
// them, and steps between them, where a slot off by one nanosecond shows.
func TestReplayCallsBesideABoundary(t *testing.T) {
	t.Parallel()
	m := model.Ratio{PPM: 100_000, Window: 10 * time.Second, Slots: 10, Floor: 3}
	for _, by := range []time.Duration{1, -1} {
		err := budgettest.VerifyCheck(t, budgettest.Subject[model.RatioState]{Name: "one ns off", Model: m, New: shiftedRatio(m, by)}, budgettest.CheckReplay)
		if err == nil || !strings.Contains(err.Error(), `replay "boundaries`) {
			t.Errorf("clock %v off: VerifyCheck(Replay) = %v, want a boundaries replay to fail", by, err)
		}
	}
	if by1 := budgettest.VerifyCheck(t, budgettest.Subject[model.RatioState]{Name: "one ns ahead", Model: m, New: shiftedRatio(m, 1)}, budgettest.CheckReplay); by1 == nil ||
		!strings.Contains(by1.Error(), `replay "boundaries-1 ns`) {
		t.Errorf("clock 1 ns ahead: %v, want the replay a nanosecond before the boundaries to fail", by1)
	}
}

// gapIgnoring is the reference bucket on a clock that treats a gap of more
// than a hundred horizons as a clock fault and lets no time pass over it:
// a budget that stops refilling after a long idle.
func gapIgnoring(m model.TokenBucket, limit time.Duration) budgettest.Factory {
	return func(_ *testing.T, c budget.Clock) budget.Budget {
		var mu sync.Mutex
		var last, lost time.Duration
		return seqcheck.NewTokenBucket(m)(budget.ClockFunc(func() time.Duration {
			mu.Lock()
			defer mu.Unlock()
			now := c.Now()
			if now-last > limit {
				lost += now - last
			}
			last = now
			return now - lost
		}))
	}
}

// On the wall clock, Replay jumps a thousand horizons, and a budget that
// ignores long gaps shows.
func TestReplayJumpsFarOnTheWallClock(t *testing.T) {
	t.Parallel()
	tm := seqcheck.TokenBucketTiming(refill)
	err := budgettest.VerifyCheck(t, budgettest.Subject[model.TokenBucketState]{Name: "ignores long gaps", Model: refill, WallClock: true,
		Scale: tm.Scale, Horizon: tm.Horizon, New: gapIgnoring(refill, 100*tm.Horizon)}, budgettest.CheckReplay)
	if err == nil || !strings.Contains(err.Error(), `replay "jump of`) {
		t.Fatalf("VerifyCheck(Replay) = %v, want a jump replay to fail", err)
	}
}

// On a scale of a few nanoseconds, the fractions replay still steps forward
// by less than the scale (never by zero, never back), so a bucket that
// drops refill fractions is caught there. The bucket's scale is 10 ns: a
// cost of 3 milli-tokens at 0.3 milli-tokens a nanosecond.
func TestReplayFractionsOnANanosecondScale(t *testing.T) {
	t.Parallel()
	m := model.TokenBucket{Capacity: 30, TransientCost: 3, ThrottledCost: 3, SuccessBonus: 1, RefillPerSecond: 300_000_000}
	tm := seqcheck.TokenBucketTiming(m)
	if tm.Scale != 10 {
		t.Fatalf("scale %v, want 10ns", tm.Scale)
	}
	sub := func(name string, f budgettest.Factory) budgettest.Subject[model.TokenBucketState] {
		return budgettest.Subject[model.TokenBucketState]{Name: name, Model: m, New: f, Scale: tm.Scale, Horizon: tm.Horizon}
	}
	if err := budgettest.VerifyCheck(t, sub("budget.TokenBucket", adapt(seqcheck.NewTokenBucket(m))), budgettest.CheckReplay); err != nil {
		t.Fatalf("the reference bucket failed Replay at a 10 ns scale: %v", err)
	}
	lost := func(_ *testing.T, c budget.Clock) budget.Budget { return mutants.NewLostFraction(m, c) }
	if err := budgettest.VerifyCheck(t, sub("mutants.LostFraction", lost), budgettest.CheckReplay); err == nil ||
		!strings.Contains(err.Error(), `replay "fractions"`) {
		t.Errorf("VerifyCheck(Replay) = %v, want the fractions replay to fail", err)
	}
}
