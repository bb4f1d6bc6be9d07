package unseen

import (
	"sync/atomic"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// SplitAtomicsBucket is a token bucket with a time-based refill
// (model.TokenBucket with RefillPerSecond > 0) written lock-free: the
// balance, in fine units of 1e-9 milli-token so that refill fractions
// carry exactly, is one atomic int64, and the instant of the last refill is
// another. A call first claims the interval since the last refill by a
// compare-and-swap on the instant, then credits that interval's refill to
// the balance by a compare-and-swap loop, then does its own withdrawal or
// deposit by another.
//
// The bug: balance and last-refill time kept in two separate atomics. The
// interval is claimed and its refill credited in two steps, and in between
// the instant says the refill is done while the balance does not hold it
// yet. With 3 tokens at instant T, a refill of 2 tokens a second, and the
// clock advanced by 5.5 s (so 14 tokens are due):
//
//  1. goroutine A, in Success(FirstAttempt), reads T+5.5s, and its CAS
//     moves the instant from T to T+5.5s (hook "splitatomics.claimed",
//     before the credit);
//  2. goroutine B runs all of Retry(Transient): the instant is already
//     T+5.5s, so nothing is due; the balance is 3 < 14, and it returns
//     false;
//  3. A credits the 11 tokens and its bonus: 15 tokens.
//
// Wrong outcome: under-grant. B is denied a retry that every order of the
// two calls grants (14 tokens are there by T+5.5s whichever goes first).
type SplitAtomicsBucket struct {
	m     model.TokenBucket
	capU  int64 // capacity in fine units
	clock budget.Clock
	units atomic.Int64 // the balance, in fine units
	last  atomic.Int64 // time.Duration of the latest refill
}

// NewSplitAtomicsBucket returns a full bucket following m, refilled by
// clock.
func NewSplitAtomicsBucket(m model.TokenBucket, clock budget.Clock) *SplitAtomicsBucket {
	b := &SplitAtomicsBucket{m: m, capU: m.Capacity * fine, clock: clock}
	b.units.Store(b.capU)
	b.last.Store(int64(clock.Now()))
	return b
}

// refill credits the refill due from the last refill to now.
func (b *SplitAtomicsBucket) refill(now time.Duration) {
	for {
		last := b.last.Load()
		if int64(now) <= last {
			return
		}
		if !b.last.CompareAndSwap(last, int64(now)) {
			continue
		}
		hook("splitatomics.claimed")
		for {
			u := b.units.Load()
			n, _ := refilled(u, b.capU, b.m.RefillPerSecond, time.Duration(last), now)
			if n == u || b.units.CompareAndSwap(u, n) {
				return
			}
		}
	}
}

// Request does nothing: a first attempt is free.
func (b *SplitAtomicsBucket) Request() {}

// Retry withdraws the cost of a retry of kind k when the refilled balance
// covers it.
func (b *SplitAtomicsBucket) Retry(k budget.Kind) bool {
	c := cost(b.m, k) * fine
	if c == 0 {
		return false
	}
	b.refill(b.clock.Now())
	for {
		u := b.units.Load()
		if u < c {
			return false
		}
		if b.units.CompareAndSwap(u, u-c) {
			return true
		}
	}
}

// Success deposits the credit of kind k, up to the capacity.
func (b *SplitAtomicsBucket) Success(k budget.Kind) {
	cr := credit(b.m, k) * fine
	b.refill(b.clock.Now())
	for {
		u := b.units.Load()
		n := min(u+cr, b.capU)
		if n == u || b.units.CompareAndSwap(u, n) {
			return
		}
	}
}

// Available returns the balance in tokens, with the refill due by now.
func (b *SplitAtomicsBucket) Available() float64 {
	u, _ := refilled(b.units.Load(), b.capU, b.m.RefillPerSecond, time.Duration(b.last.Load()), b.clock.Now())
	return tokensOf(u)
}
