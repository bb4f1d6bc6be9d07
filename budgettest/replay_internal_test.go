package budgettest

import (
	"math"
	"math/bits"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/internal/harness"
	"github.com/retrybudget/retrybudget/model"
)

// jumpsOf returns the jump of each jump replay of sub (its first advance),
// and checks that the replay's clock, summed from 0, never passes MaxInt64.
func jumpsOf[S any](t *testing.T, sub Subject[S]) []time.Duration {
	t.Helper()
	var out []time.Duration
	for _, r := range sub.replays() {
		if !strings.HasPrefix(r.name, "jump of ") {
			continue
		}
		var now uint64
		for _, op := range r.ops {
			if op.Op != model.Advance {
				continue
			}
			now += uint64(op.D)
			if now > math.MaxInt64 {
				t.Errorf("replay %q: the clock passes MaxInt64", r.name)
			}
		}
		out = append(out, firstAdvance(r.ops))
	}
	return out
}

func firstAdvance(ops []model.Op) time.Duration {
	for _, op := range ops {
		if op.Op == model.Advance {
			return op.D
		}
	}
	return 0
}

// On the fake clock, besides the jumps beside overflow thresholds
// (harness.Jumps), Replay jumps once in every binary order of magnitude
// from the horizon's to 2^62, by an odd value that is not a power of two,
// and never past 2^62, so that the clock never overflows.
func TestReplayJumpsInEveryMagnitude(t *testing.T) {
	for _, tm := range []harness.Timing{{Scale: time.Second, Horizon: 10 * time.Second}, {Scale: 10, Horizon: 30}, {Scale: model.MaxTiming, Horizon: model.MaxTiming}} {
		sub := Subject[model.TokenBucketState]{Name: "timing", Model: model.TokenBucket{}, Scale: tm.Scale, Horizon: tm.Horizon}
		all := jumpsOf(t, sub)
		thresholds := harness.Jumps(tm)
		var own []time.Duration
		for _, j := range all {
			if !slices.Contains(thresholds, j) {
				own = append(own, j)
			}
		}
		lo := bits.Len64(uint64(tm.Horizon))
		if want := 63 - lo; len(own) != want {
			t.Errorf("%+v: %d jumps besides the thresholds, want %d (one per magnitude from 2^%d to 2^62): %v", tm, len(own), want, lo-1, own)
		}
		for i, j := range own {
			e := lo + i // the magnitude [2^(e-1), 2^e)
			if bits.Len64(uint64(j)) != e || j&1 == 0 || j&(j-1) == 0 {
				t.Errorf("%+v: jump %d is %d ns, want an odd value in [2^%d, 2^%d) that is not a power of two", tm, i, j, e-1, e)
			}
		}
	}
}

// On the wall clock, Replay jumps far past any gap a budget might take for
// a clock fault (over a hundred horizons), no further than a bubble's
// timers can go (a thousand horizons), and once by a gap that is not a
// multiple of the scale.
func TestReplayJumpsOnTheWallClock(t *testing.T) {
	scale, horizon := 2*time.Second, 3*time.Second
	sub := Subject[model.TokenBucketState]{Name: "timing", Model: model.TokenBucket{}, Scale: scale, Horizon: horizon, WallClock: true}
	got := jumpsOf(t, sub)
	if len(got) < 2 {
		t.Fatalf("wall-clock jumps %v, want at least two", got)
	}
	for _, j := range got {
		if j <= 100*horizon || j > 1000*horizon {
			t.Errorf("wall-clock jump %v, want one in (%v, %v]", j, 100*horizon, 1000*horizon)
		}
	}
	if !slices.ContainsFunc(got, func(j time.Duration) bool { return j%scale != 0 }) {
		t.Errorf("wall-clock jumps %v: none is off the multiples of %v", got, scale)
	}
}

// After a drain, Replay steps over the idle gaps where narrow counters of
// time wrap: 2^16 slot widths (a 16-bit slot tag), 2^32 milliseconds (a
// 32-bit millisecond tick), 2^32 nanoseconds and microseconds; never
// past MaxInt64, once each, and not on the wall clock or for an in-flight
// model, which has no time.
func TestReplayIdleGaps(t *testing.T) {
	m := model.Ratio{PPM: 100_000, Window: 10 * time.Second, Slots: 10, Floor: 3}
	sub := Subject[model.RatioState]{Name: "gaps", Model: m, Scale: time.Second, Horizon: 10 * time.Second}
	gaps := map[time.Duration]string{}
	for _, r := range sub.replays() {
		if !strings.HasPrefix(r.name, "idle gap of ") {
			continue
		}
		g := firstAdvance(r.ops)
		if prev, ok := gaps[g]; ok {
			t.Errorf("gap %d ns twice: %q and %q", int64(g), prev, r.name)
		}
		gaps[g] = r.name
		var now uint64
		denied := false
		s := m.Init()
		for _, op := range r.ops {
			if op.Op == model.Advance {
				now += uint64(op.D)
				if now > math.MaxInt64 {
					t.Errorf("replay %q: the clock passes MaxInt64", r.name)
				}
				break
			}
			var granted bool
			if s, granted = m.Step(s, op); op.Op == model.Retry && !granted {
				denied = true
			}
		}
		if !denied {
			t.Errorf("replay %q: the model denies nothing before the gap; the budget is not drained", r.name)
		}
	}
	for _, want := range []time.Duration{1 << 16 * time.Second, 1 << 32 * time.Millisecond, 1 << 32, 1 << 32 * time.Microsecond, 1 << 15 * 10 * time.Second, 1 << 33 * time.Second} {
		if _, ok := gaps[want]; !ok {
			t.Errorf("no idle gap of %d ns (%v); have %d gaps", int64(want), want, len(gaps))
		}
	}
	sub.WallClock = true
	for _, r := range sub.replays() {
		if strings.HasPrefix(r.name, "idle gap of ") {
			t.Fatalf("on the wall clock: replay %q", r.name)
		}
	}
}
