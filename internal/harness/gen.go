package harness

import (
	"math"
	"math/rand/v2"
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

// Op draws a call or, one time in five when tm.Scale is set, a clock step.
func Op(src Source, tm Timing) model.Op {
	if tm.Scale > 0 && src.IntN(5, "op") == 0 {
		return model.OpAdvance(Step(src, tm))
	}
	return Call(src)
}

// The longest clock jumps: far past any horizon on a ManualClock, and what a
// testing/synctest bubble's timers can take.
const (
	farJump    = 1 << 62
	bubbleJump = 100     // horizons
	bubbleFar  = 1 << 50 // ns, about 13 days: a bubble's clock must not pass 2262
)

// Step draws a clock step: none, a fraction of the scale, about one scale,
// up to the horizon, far past it, or backwards (see Timing.Forward; a
// forward jump past the horizon is at most 100 horizons and 2^50 ns).
func Step(src Source, tm Timing) time.Duration {
	scale, horizon := int64(tm.Scale), tm.horizon()
	d := func(lo, hi int64, label string) time.Duration {
		return time.Duration(src.Int64Range(lo, max(lo, hi), label))
	}
	switch src.IntN(10, "step") {
	case 0:
		return 0
	case 1, 2:
		return d(1, max(scale/2, 1), "fraction")
	case 3, 4:
		return d(max(scale-1, 1), scale+1, "scale")
	case 5, 6:
		return d(1, horizon, "horizon")
	case 7:
		if tm.Forward {
			return d(horizon, min(bubbleJump*horizon, bubbleFar), "far")
		}
		return d(horizon, farJump, "far")
	}
	if tm.Forward {
		return d(1, horizon, "forward")
	}
	return -d(1, horizon, "back")
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
	if tm.Scale > 0 {
		for range steps {
			clock = append(clock, Step(src, tm))
		}
	}
	return lists, clock
}

// ModelBudget steps m as a budget on clock: before each operation it moves
// the model's clock to clock's reading. It is safe for concurrent use.
func ModelBudget[S any](m model.Model[S], clock budget.Clock) budget.Budget {
	return &modelBudget[S]{m: m, s: m.Init(), clock: clock}
}

type modelBudget[S any] struct {
	mu    sync.Mutex
	m     model.Model[S]
	s     S
	clock budget.Clock
	last  time.Duration
}

func (b *modelBudget[S]) step(op model.Op) bool {
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
