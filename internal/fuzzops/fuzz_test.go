package fuzzops_test

import (
	"errors"
	"math"
	"os"
	"testing"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/internal/fuzzops"
	"github.com/retrybudget/retrybudget/internal/seqcheck"
	"github.com/retrybudget/retrybudget/internal/subjects/mutants"
	"github.com/retrybudget/retrybudget/model"
)

// ratioUnderTest returns the ratio implementation the targets check: the
// reference budget, or the mutant named by RETRYBUDGET_FUZZ_RATIO.
func ratioUnderTest(t *testing.T) func(model.Ratio) func(budget.Clock) budget.Budget {
	name := os.Getenv("RETRYBUDGET_FUZZ_RATIO")
	if name == "" {
		return seqcheck.NewRatio
	}
	newMutant, ok := mutants.RatioMutants()[name]
	if !ok {
		t.Fatalf("RETRYBUDGET_FUZZ_RATIO=%q names no ratio mutant", name)
	}
	return func(m model.Ratio) func(budget.Clock) budget.Budget {
		return func(c budget.Clock) budget.Budget { return newMutant(m, c) }
	}
}

// FuzzRatioWindow checks the ratio window's slot arithmetic: arbitrary
// windows and slot counts, a clock that starts anywhere in int64, and
// absolute readings that go backwards, jump past the window or sit at the
// edges of int64.
func FuzzRatioWindow(f *testing.F) {
	f.Fuzz(func(t *testing.T, window int64, slots uint16, ppm uint32, floor uint8, start int64, steps []byte) {
		m := ratioOf(window, slots, ppm, floor)
		init := m.Init()
		init.Clock = model.Clock{Now: time.Duration(start), Seen: time.Duration(start)}
		sub := seqcheck.Subject[model.RatioState]{Model: m, New: ratioUnderTest(t)(m)}
		if err := seqcheck.Replay(sub, init, time.Duration(start), fuzzops.Instants(time.Duration(start), steps)); err != nil {
			t.Fatalf("%+v, clock from %d:\n%v", m, start, err)
		}
	})
}

func FuzzRatio(f *testing.F) {
	f.Fuzz(func(t *testing.T, window int64, slots uint16, ppm uint32, floor uint8, ops []byte) {
		m := ratioOf(window, slots, ppm, floor)
		sub := seqcheck.Subject[model.RatioState]{Model: m, New: ratioUnderTest(t)(m)}
		if err := seqcheck.Replay(sub, m.Init(), 0, fuzzops.Ops(ops)); err != nil {
			t.Fatalf("%+v:\n%v", m, err)
		}
	})
}

func FuzzTokenBucket(f *testing.F) {
	f.Fuzz(func(t *testing.T, capacity, transient, throttled, bonus, refill int64, noRefund bool, ops []byte) {
		m := tokenBucketOf(capacity, transient, throttled, bonus, refill, noRefund)
		sub := seqcheck.Subject[model.TokenBucketState]{Model: m, New: seqcheck.NewTokenBucket(m)}
		if err := seqcheck.Replay(sub, m.Init(), 0, fuzzops.Ops(ops)); err != nil {
			t.Fatalf("%+v:\n%v", m, err)
		}
	})
}

func FuzzThrottle(f *testing.F) {
	f.Fuzz(func(t *testing.T, max, ratio int64, ops []byte) {
		m := throttleOf(max, ratio)
		sub := seqcheck.Subject[model.ThrottleState]{Model: m, New: seqcheck.NewThrottle(m)}
		if err := seqcheck.Replay(sub, m.Init(), 0, fuzzops.Ops(ops)); err != nil {
			t.Fatalf("%+v:\n%v", m, err)
		}
	})
}

// FuzzConfig checks that the constructors never panic, accept exactly the
// configurations their documentation allows, and that what they accept
// works.
func FuzzConfig(f *testing.F) {
	f.Fuzz(func(t *testing.T, capacity, transient, throttled, bonus, refill float64, noRefund bool,
		ratio float64, window int64, slots int, floor int, maxTokens, tokenRatio float64) {
		tb := budget.TokenBucketConfig{Capacity: capacity, TransientCost: transient, ThrottledCost: throttled,
			SuccessBonus: bonus, NoRefund: noRefund, RefillPerSecond: refill, Clock: new(budget.ManualClock)}
		b, err := budget.NewTokenBucket(tb)
		expect(t, "NewTokenBucket", tb, err, validTokenBucket(tb))
		exercise(t, b, err)

		rc := budget.RatioConfig{Ratio: ratio, Window: time.Duration(window), Slots: slots, Floor: floor, Clock: new(budget.ManualClock)}
		if rc.Slots > 1<<20 {
			rc.Slots = rc.Slots%(1<<21) + 1 // keep the ring's memory small; the range check is still crossed
		}
		r, err := budget.NewRatio(rc)
		expect(t, "NewRatio", rc, err, validRatio(rc))
		exercise(t, r, err)

		th, err := budget.NewThrottle(maxTokens, tokenRatio)
		expect(t, "NewThrottle", [2]float64{maxTokens, tokenRatio}, err, validThrottle(maxTokens, tokenRatio))
		exercise(t, th, err)
	})
}

func expect(t *testing.T, name string, cfg any, err error, valid bool) {
	t.Helper()
	switch {
	case valid && err != nil:
		t.Fatalf("%s(%+v) = %v; the documented ranges allow it", name, cfg, err)
	case !valid && err == nil:
		t.Fatalf("%s(%+v) succeeded; the documented ranges forbid it", name, cfg)
	case err != nil && !errors.Is(err, budget.ErrInvalidConfig):
		t.Fatalf("%s(%+v) = %v, which does not wrap ErrInvalidConfig", name, cfg, err)
	}
}

// exercise calls every method of an accepted budget.
func exercise[B budget.Budget](t *testing.T, b B, err error) {
	if err != nil {
		return
	}
	b.Request()
	b.Retry(budget.Transient)
	b.Retry(budget.Throttled)
	b.Success(budget.Transient)
	b.Success(budget.FirstAttempt)
}

// milli converts as the documentation says: to the nearest thousandth.
func milli(x float64) (int64, bool) {
	if math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) > 1e15 {
		return 0, false
	}
	return int64(math.Round(x * 1000)), true
}

func inRange(x float64, lo, hi int64) bool {
	m, ok := milli(x)
	return ok && lo <= m && m <= hi
}

// validTokenBucket states TokenBucketConfig's documented ranges, in
// milli-tokens: capacity [0.001, 1e6], costs [0.001, capacity], bonus
// [0, capacity], refill [0, 1e6].
func validTokenBucket(c budget.TokenBucketConfig) bool {
	capM, ok := milli(c.Capacity)
	return ok && inRange(c.Capacity, 1, 1_000_000_000) &&
		inRange(c.TransientCost, 1, capM) && inRange(c.ThrottledCost, 1, capM) &&
		inRange(c.SuccessBonus, 0, capM) && inRange(c.RefillPerSecond, 0, 1_000_000_000)
}

// validRatio states RatioConfig's documented ranges: ratio in (0, 1] and at
// least one part per million after rounding, a positive window, 1 to 2^20
// slots and no more than the window's nanoseconds, a floor >= 0.
func validRatio(c budget.RatioConfig) bool {
	return !math.IsNaN(c.Ratio) && c.Ratio > 0 && c.Ratio <= 1 && math.Round(c.Ratio*1e6) >= 1 &&
		c.Window > 0 && c.Slots >= 1 && c.Slots <= 1<<20 && int64(c.Slots) <= int64(c.Window) && c.Floor >= 0
}

// validThrottle states NewThrottle's documented ranges: maxTokens in
// (0, 1000] to the thousandth, tokenRatio in [0.001, 1000] with digits past
// the third decimal ignored.
func validThrottle(maxTokens, tokenRatio float64) bool {
	if !inRange(maxTokens, 1, 1_000_000) || math.IsNaN(tokenRatio) || tokenRatio <= 0 || tokenRatio > 1000 {
		return false
	}
	return int64(math.Round(tokenRatio*1e6))/1000 >= 1
}
