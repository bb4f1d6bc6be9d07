package fromdocs

import (
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// CowModel is the rule CowBucket follows: 3 tokens, 1 per transient retry,
// 1.5 per throttled one, no refund, 0.01 per success, and a refill of 250
// tokens a second.
var CowModel = model.TokenBucket{Capacity: 3_000, TransientCost: 1_000, ThrottledCost: 1_500, SuccessBonus: 10, RefillPerSecond: 250_000, NoRefund: true}

// cowState is one immutable version of a CowBucket's state.
type cowState struct {
	tokens int64 // milli-tokens
	frac   int64 // part of a milli-token refilled, in units of 1e-9
	seen   time.Duration
}

// CowBucket is a lock-free token bucket with refill (model.TokenBucket):
// its state is an immutable cowState behind an atomic pointer, and every
// call that observes the clock builds a new version and swaps it in with
// CompareAndSwap, starting again from a fresh load when it loses.
//
// Linearizability: a call loads the pointer, then reads the clock, then
// computes the next version and swaps it in. A successful swap proves that
// the pointer did not change between the load and the swap (versions are
// fresh allocations, and the loaded one stays referenced, so no ABA), so
// the call's effect is placed at its clock reading, where the state was
// the one it loaded. Every call that observes the clock swaps in a new
// version, even when nothing changed (a denied retry), so that the windows
// [load, swap] of two successful calls never overlap: the order of the
// clock readings is the order of the swaps. Calls that observe nothing
// (Request, a Retry of a kind that is not a retry kind) touch nothing.
type CowBucket struct {
	m     model.TokenBucket
	clock budget.Clock
	state atomic.Pointer[cowState]
}

// NewCow returns a full bucket following m, on clock c.
func NewCow(m model.TokenBucket, c budget.Clock) *CowBucket {
	b := &CowBucket{m: m, clock: c}
	b.state.Store(&cowState{tokens: m.Capacity, seen: c.Now()})
	return b
}

// refilled returns s brought up to the clock reading now.
func (b *CowBucket) refilled(s cowState, now time.Duration) cowState {
	var elapsed uint64
	s.seen, elapsed = observe(s.seen, now)
	hi, lo := bits.Mul64(elapsed, uint64(b.m.RefillPerSecond))
	lo, carry := bits.Add64(lo, uint64(s.frac), 0)
	hi += carry
	need := uint64(b.m.Capacity-s.tokens) * nsPerSecond
	if hi > 0 || lo >= need {
		s.tokens, s.frac = b.m.Capacity, 0
		return s
	}
	s.tokens += int64(lo / nsPerSecond)
	s.frac = int64(lo % nsPerSecond)
	return s
}

// update applies f to the state as of a fresh clock reading until its
// swap wins, and returns f's answer.
func (b *CowBucket) update(f func(*cowState) bool) bool {
	for {
		old := b.state.Load()
		n := b.refilled(*old, b.clock.Now())
		ok := f(&n)
		if b.state.CompareAndSwap(old, &n) {
			return ok
		}
	}
}

func (b *CowBucket) cost(k budget.Kind) int64 {
	if k == budget.Throttled {
		return b.m.ThrottledCost
	}
	return b.m.TransientCost
}

// Request does nothing.
func (b *CowBucket) Request() {}

// Retry withdraws the retry's cost when the balance covers it.
func (b *CowBucket) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	c := b.cost(kind)
	return b.update(func(s *cowState) bool {
		if s.tokens < c {
			return false
		}
		s.tokens -= c
		return true
	})
}

// Success deposits the bonus, or a retry's cost unless NoRefund.
func (b *CowBucket) Success(kind budget.Kind) {
	credit := b.m.SuccessBonus
	if kind.IsRetry() && !b.m.NoRefund {
		credit = b.cost(kind)
	}
	b.update(func(s *cowState) bool {
		s.tokens += credit
		if s.tokens >= b.m.Capacity {
			s.tokens, s.frac = b.m.Capacity, 0
		}
		return false
	})
}

// Available returns the balance in tokens as of now. It changes nothing.
func (b *CowBucket) Available() float64 {
	s := b.refilled(*b.state.Load(), b.clock.Now())
	return float64(s.tokens) / 1000
}
