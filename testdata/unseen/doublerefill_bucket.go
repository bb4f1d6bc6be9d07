package unseen

import (
	"sync"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// DoubleRefillBucket is a token bucket with a time-based refill
// (model.TokenBucket with RefillPerSecond > 0) guarded by a mutex, whose
// author kept the refill arithmetic out of the critical section: a call
// reads the clock, copies the balance and the last refill instant under the
// lock, computes the refill due outside it, then takes the lock again to
// add the refill, move the instant forward and do its own withdrawal or
// deposit. The balance is in fine units of 1e-9 milli-token.
//
// The bug: a refill computed from a clock read and a snapshot taken outside
// the lock that applies it. Two calls that copy the same last instant each
// compute the refill of the same interval, and both add it. With 3 tokens
// at instant T, 2 tokens a second, and the clock advanced by 5.5 s:
//
//  1. goroutine A, in Retry(Throttled), reads T+5.5s, copies (3 tokens, T)
//     and computes 11 tokens due (hook "doublerefill.computed");
//  2. goroutine B runs all of Retry(Transient): copies (3 tokens, T),
//     adds 11 (14 tokens), moves the instant to T+5.5s, withdraws 14, and
//     returns true;
//  3. A takes the lock, adds its 11 again (11 tokens), withdraws 5, and
//     returns true.
//
// Wrong outcome: over-grant. Both retries are granted where every order
// grants one (14 tokens pay for the transient retry or the throttled one,
// and what is left pays for neither), and 6 tokens remain that no order
// leaves: the interval was refilled twice.
type DoubleRefillBucket struct {
	m     model.TokenBucket
	capU  int64
	clock budget.Clock

	mu    sync.Mutex
	units int64 // the balance, in fine units
	last  time.Duration
}

// NewDoubleRefillBucket returns a full bucket following m, refilled by
// clock.
func NewDoubleRefillBucket(m model.TokenBucket, clock budget.Clock) *DoubleRefillBucket {
	return &DoubleRefillBucket{m: m, capU: m.Capacity * fine, clock: clock, units: m.Capacity * fine, last: clock.Now()}
}

// due returns the refill due at the clock's reading now, computed outside
// the lock from a copy of the state.
func (b *DoubleRefillBucket) due() (gain int64, now time.Duration) {
	now = b.clock.Now()
	b.mu.Lock()
	u, last := b.units, b.last
	b.mu.Unlock()
	n, _ := refilled(u, b.capU, b.m.RefillPerSecond, last, now)
	hook("doublerefill.computed")
	return n - u, now
}

// applyLocked adds gain and moves the last refill instant to now. b.mu must
// be held.
func (b *DoubleRefillBucket) applyLocked(gain int64, now time.Duration) {
	b.units = min(b.units+gain, b.capU)
	if now > b.last {
		b.last = now
	}
}

// Request does nothing: a first attempt is free.
func (b *DoubleRefillBucket) Request() {}

// Retry withdraws the cost of a retry of kind k when the refilled balance
// covers it.
func (b *DoubleRefillBucket) Retry(k budget.Kind) bool {
	c := cost(b.m, k) * fine
	if c == 0 {
		return false
	}
	gain, now := b.due()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.applyLocked(gain, now)
	if b.units < c {
		return false
	}
	b.units -= c
	return true
}

// Success deposits the credit of kind k, up to the capacity.
func (b *DoubleRefillBucket) Success(k budget.Kind) {
	cr := credit(b.m, k) * fine
	gain, now := b.due()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.applyLocked(gain, now)
	b.units = min(b.units+cr, b.capU)
}

// Available returns the balance in tokens, with the refill due by now.
func (b *DoubleRefillBucket) Available() float64 {
	now := b.clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	u, _ := refilled(b.units, b.capU, b.m.RefillPerSecond, b.last, now)
	return tokensOf(u)
}
