package harness

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"pgregory.net/rapid"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// A Source is where the operation generator draws from. Rand and Rapid are
// its two back ends: math/rand for the concurrent checks, which replay a
// scenario from its seed, and rapid for the sequential check, which shrinks
// what it draws. label names a draw in rapid's reports.
type Source interface {
	// IntN returns a number in [0, n).
	IntN(n int, label string) int
	// Int64Range returns a number in [lo, hi]; lo <= hi.
	Int64Range(lo, hi int64, label string) int64
}

// Rand returns a Source backed by r.
func Rand(r *rand.Rand) Source { return randSource{r} }

type randSource struct{ r *rand.Rand }

func (s randSource) IntN(n int, _ string) int { return s.r.IntN(n) }
func (s randSource) Int64Range(lo, hi int64, _ string) int64 {
	span := uint64(hi) - uint64(lo)
	if span == math.MaxUint64 {
		return int64(s.r.Uint64())
	}
	return int64(uint64(lo) + s.r.Uint64N(span+1))
}

// Rapid returns a Source backed by t.
func Rapid(t *rapid.T) Source { return rapidSource{t} }

type rapidSource struct{ t *rapid.T }

func (s rapidSource) IntN(n int, label string) int {
	return rapid.IntRange(0, n-1).Draw(s.t, label)
}
func (s rapidSource) Int64Range(lo, hi int64, label string) int64 {
	return rapid.Int64Range(lo, hi).Draw(s.t, label)
}

// Kind draws the kind of a Retry or Success: mostly the two retry kinds,
// sometimes FirstAttempt, and now and then a kind no caller should pass.
func Kind(src Source) model.Kind {
	switch x := src.IntN(12, "kind"); {
	case x < 5:
		return model.Transient
	case x < 9:
		return model.Throttled
	case x < 11:
		return model.FirstAttempt
	}
	return model.Kind(7)
}

// RetryKind draws Transient or Throttled.
func RetryKind(src Source) model.Kind {
	if src.IntN(2, "retryKind") == 0 {
		return model.Transient
	}
	return model.Throttled
}

// Call draws a call of the budget: half retries, three in ten successes,
// two in ten requests.
func Call(src Source) model.Op {
	switch x := src.IntN(10, "call"); {
	case x < 5:
		return model.OpRetry(Kind(src))
	case x < 8:
		return model.OpSuccess(Kind(src))
	}
	return model.OpRequest
}

// Op draws a call or, one time in five when tm.Scale is set, a clock step
// from a clock reading now.
func Op(src Source, tm Timing, now time.Duration) model.Op {
	if tm.Scale > 0 && src.IntN(5, "op") == 0 {
		return model.OpAdvance(Step(src, tm, now))
	}
	return Call(src)
}

// The longest clock jumps: what a testing/synctest bubble's timers can take.
const (
	bubbleJump = 100     // horizons
	bubbleFar  = 1 << 50 // ns, about 13 days: a bubble's clock must not pass 2262
)

// Step draws a clock step from a clock reading now: none, a fraction of the
// scale, about one scale, to the next boundary of the scale or of the
// horizon (counted from instant 0, where slots are aligned) or a nanosecond
// either side of it, up to the horizon, a jump far past it, or backwards
// (see Timing.Forward; a forward jump past the horizon is then at most 100
// horizons and 2^50 ns). Far jumps are spread over every order of
// magnitude up to 2^63 and land beside the instants where elapsed × rate
// overflows (see Jumps), never only on round numbers.
func Step(src Source, tm Timing, now time.Duration) time.Duration {
	scale, horizon := int64(tm.Scale), tm.horizon()
	d := func(lo, hi int64, label string) time.Duration {
		return time.Duration(src.Int64Range(lo, max(lo, hi), label))
	}
	switch src.IntN(12, "step") {
	case 0:
		return 0
	case 1, 2:
		return d(1, max(scale/2, 1), "fraction")
	case 3:
		return d(max(scale-1, 1), scale+1, "scale")
	case 4:
		return toBoundary(now, scale) + d(-1, 1, "boundary")
	case 5:
		return toBoundary(now, horizon) + d(-1, 1, "boundary")
	case 6, 7:
		return d(1, horizon, "horizon")
	case 8, 9:
		if tm.Forward {
			return d(horizon, min(bubbleJump*horizon, bubbleFar), "far")
		}
		if src.IntN(2, "farKind") == 0 {
			js := Jumps(tm)
			return js[src.IntN(len(js), "threshold")]
		}
		// An order of magnitude from the horizon's to 2^62, then any
		// value within it.
		lo := min(bits.Len64(uint64(horizon)), 62)
		e := lo + src.IntN(63-lo, "magnitude")
		return d(int64(1)<<(e-1), int64(uint64(1)<<e-1), "far")
	case 10:
		if tm.Forward {
			return d(1, horizon, "forward")
		}
		return -d(1, horizon, "back")
	}
	if tm.Forward {
		return d(1, scale, "forward")
	}
	return -d(1, max(scale, 1), "back")
}

// toBoundary returns the step from now to the next multiple of unit after
// it, in (0, unit]; the arithmetic wraps as a ManualClock's does.
func toBoundary(now time.Duration, unit int64) time.Duration {
	if unit <= 0 {
		return 0
	}
	r := int64(now) % unit
	if r < 0 {
		r += unit
	}
	return time.Duration(unit - r)
}

// overflowFactors are the multipliers of elapsed nanoseconds that budgets
// commonly use: a rate per second in tokens or milli-tokens, unit
// conversions, and the products of those.
var overflowFactors = []int64{2, 3, 7, 10, 60, 100, 1000, 3600, 10_000, 86_400, 1_000_000, 1_000_000_000, 1_000_000_000_000, 1_000_000_000_000_000}

// Jumps returns the far clock steps that land beside overflow thresholds:
// for each common multiplier m of elapsed time, and for the rates that tm's
// scale implies, the steps one nanosecond either side of MaxInt64 / m, and
// a step between that and twice it, where the product wraps to a value
// that is neither zero nor round. Every jump is positive; none is a power
// of two.
func Jumps(tm Timing) []time.Duration {
	factors := slices.Clone(overflowFactors)
	if s := int64(tm.Scale); s > 0 {
		// The rate, per second, that pays for one unit in a scale: in
		// units, milli-units and nano-units.
		for _, unit := range []int64{1_000_000_000, 1_000_000_000_000} {
			if r := unit / s; r > 1 {
				factors = append(factors, r, r+1)
			}
		}
	}
	var out []time.Duration
	for _, m := range factors {
		t := math.MaxInt64 / m
		for _, j := range []int64{t - 1, t + 1, t + t/3 + 1} {
			if j > 0 && j&(j-1) != 0 {
				out = append(out, time.Duration(j))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Lists draws the operation lists of a concurrent scenario: goroutines
// lists of ops calls each, and clock steps (none when tm.Scale is zero).
func Lists(src Source, goroutines, ops, steps int, tm Timing) ([][]model.Op, []time.Duration) {
	lists := make([][]model.Op, goroutines)
	for i := range lists {
		lists[i] = make([]model.Op, ops)
		for j := range lists[i] {
			lists[i][j] = Call(src)
		}
	}
	var clock []time.Duration
	var now time.Duration
	if tm.Scale > 0 {
		for range steps {
			d := Step(src, tm, now)
			now += d
			clock = append(clock, d)
		}
	}
	return lists, clock
}

// ModelBudget steps m as a budget on clock: before each operation it moves
// the model's clock to clock's reading. It is safe for concurrent use, and
// a budget.InFlightBudget (a model that is not model.Structured ignores
// the ends it is told of).
func ModelBudget[S any](m model.Model[S], clock budget.Clock) budget.Budget {
	return &modelBudget[S]{m: m, s: m.Init(), clock: clock, structured: IsStructured(m)}
}

type modelBudget[S any] struct {
	mu         sync.Mutex
	m          model.Model[S]
	s          S
	clock      budget.Clock
	last       time.Duration
	structured bool
}

func (b *modelBudget[S]) step(op model.Op) bool {
	if (op.Op == model.AttemptEnd || op.Op == model.CallEnd) && !b.structured {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if now := b.clock.Now(); now != b.last {
		b.s, _ = b.m.Step(b.s, model.OpAdvance(now-b.last))
		b.last = now
	}
	var granted bool
	b.s, granted = b.m.Step(b.s, op)
	return granted
}

func (b *modelBudget[S]) Request()                 { b.step(model.OpRequest) }
func (b *modelBudget[S]) Retry(k budget.Kind) bool { return b.step(model.OpRetry(model.Kind(k))) }
func (b *modelBudget[S]) Success(k budget.Kind)    { b.step(model.OpSuccess(model.Kind(k))) }
func (b *modelBudget[S]) AttemptEnd(k budget.Kind) { b.step(model.OpAttemptEnd(model.Kind(k))) }
func (b *modelBudget[S]) CallEnd()                 { b.step(model.OpCallEnd) }
