package wild

import (
	"sync"

	"github.com/retrybudget/retrybudget/budget"
)

// NegativeRefillBucket is a refilling token bucket that trusts its clock
// (time handling: a reading earlier than the last one refills a negative
// amount, and the interval is refilled again when the clock comes back).
type NegativeRefillBucket struct {
	capacity, transient, throttled, bonus, perSec int64
	fill                                          int64 // ns to fill from empty
	clock                                         budget.Clock

	mu    sync.Mutex
	milli int64
	frac  int64 // 1e-9 milli-tokens
	last  int64
}

// NewNegativeRefillBucket returns a full bucket (milli-tokens) refilling
// perSec milli-tokens a second.
func NewNegativeRefillBucket(capacity, transient, throttled, bonus, perSec int64, clock budget.Clock) *NegativeRefillBucket {
	return &NegativeRefillBucket{capacity: capacity, transient: transient, throttled: throttled, bonus: bonus, perSec: perSec,
		fill: (capacity*nsPerSec + perSec - 1) / perSec, clock: clock, milli: capacity, last: int64(clock.Now())}
}

// refilled returns the balance, fraction and instant at the clock reading now.
func (b *NegativeRefillBucket) refilled(now int64) (milli, frac, last int64) {
	elapsed := now - b.last
	switch {
	case elapsed >= b.fill:
		return b.capacity, 0, now
	case elapsed <= -b.fill:
		return 0, 0, now
	}
	acc := b.frac + elapsed*b.perSec
	milli, frac = b.milli+floorDiv(acc, nsPerSec), floorMod(acc, nsPerSec)
	if milli < 0 {
		return 0, 0, now
	}
	if milli >= b.capacity {
		return b.capacity, 0, now
	}
	return milli, frac, now
}

// refill brings the balance to the clock's reading. b.mu is held.
func (b *NegativeRefillBucket) refill() {
	b.milli, b.frac, b.last = b.refilled(int64(b.clock.Now()))
}

// Request does nothing.
func (b *NegativeRefillBucket) Request() {}

// Retry refills, then withdraws the cost of k if the balance covers it.
func (b *NegativeRefillBucket) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	cost := b.transient
	if k == budget.Throttled {
		cost = b.throttled
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill()
	if b.milli < cost {
		return false
	}
	b.milli -= cost
	return true
}

// Success refills, then credits the refund or the bonus, up to capacity.
func (b *NegativeRefillBucket) Success(k budget.Kind) {
	credit := b.bonus
	switch k {
	case budget.Transient:
		credit = b.transient
	case budget.Throttled:
		credit = b.throttled
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill()
	if b.milli += credit; b.milli >= b.capacity {
		b.milli, b.frac = b.capacity, 0
	}
}

// Available returns the balance in tokens as of now, changing nothing.
func (b *NegativeRefillBucket) Available() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	m, _, _ := b.refilled(int64(b.clock.Now()))
	return float64(m) / 1000
}

// RetryOnlyBaseBucket is a refilling token bucket that moves its refill base
// instant only when a retry is asked for (time handling: a Success refills
// from the old base without moving it, so the next call refills the same
// interval a second time).
type RetryOnlyBaseBucket struct {
	capacity, transient, throttled, bonus, perSec int64
	clock                                         budget.Clock

	mu    sync.Mutex
	milli int64
	frac  int64
	base  int64 // instant the balance was last brought up to date by Retry
}

// NewRetryOnlyBaseBucket returns a full bucket (milli-tokens) refilling
// perSec milli-tokens a second.
func NewRetryOnlyBaseBucket(capacity, transient, throttled, bonus, perSec int64, clock budget.Clock) *RetryOnlyBaseBucket {
	return &RetryOnlyBaseBucket{capacity: capacity, transient: transient, throttled: throttled, bonus: bonus, perSec: perSec,
		clock: clock, milli: capacity, base: int64(clock.Now())}
}

// refilled returns the balance and fraction at instant now.
func (b *RetryOnlyBaseBucket) refilled(now int64) (int64, int64) {
	if now <= b.base {
		return b.milli, b.frac
	}
	elapsed := uint64(now) - uint64(b.base)
	need := (b.capacity-b.milli)*nsPerSec - b.frac
	if elapsed >= uint64((need+b.perSec-1)/b.perSec) {
		return b.capacity, 0
	}
	acc := b.frac + int64(elapsed)*b.perSec
	return b.milli + acc/nsPerSec, acc % nsPerSec
}

// Request does nothing.
func (b *RetryOnlyBaseBucket) Request() {}

// Retry refills, moves the base, then withdraws the cost of k if covered.
func (b *RetryOnlyBaseBucket) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	cost := b.transient
	if k == budget.Throttled {
		cost = b.throttled
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := int64(b.clock.Now())
	b.milli, b.frac = b.refilled(now)
	b.base = max(b.base, now)
	if b.milli < cost {
		return false
	}
	b.milli -= cost
	return true
}

// Success refills and credits the refund or the bonus, up to capacity.
func (b *RetryOnlyBaseBucket) Success(k budget.Kind) {
	credit := b.bonus
	switch k {
	case budget.Transient:
		credit = b.transient
	case budget.Throttled:
		credit = b.throttled
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.milli, b.frac = b.refilled(int64(b.clock.Now()))
	if b.milli += credit; b.milli >= b.capacity {
		b.milli, b.frac = b.capacity, 0
	}
}

// Available returns the balance in tokens as of now.
func (b *RetryOnlyBaseBucket) Available() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	m, _ := b.refilled(int64(b.clock.Now()))
	return float64(m) / 1000
}

// OverflowRefillBucket is a refilling token bucket that multiplies the
// elapsed nanoseconds by the rate in int64 before checking for a full bucket
// (time handling: at 7 tokens a second the product wraps after 2^63/7000 ns,
// about 15.25 days, and a long idle gap drains the bucket instead of filling it).
type OverflowRefillBucket struct {
	capacity, transient, throttled, bonus, perSec int64
	clock                                         budget.Clock

	mu    sync.Mutex
	milli int64
	frac  int64
	last  int64
}

// NewOverflowRefillBucket returns a full bucket (milli-tokens) refilling
// perSec milli-tokens a second.
func NewOverflowRefillBucket(capacity, transient, throttled, bonus, perSec int64, clock budget.Clock) *OverflowRefillBucket {
	return &OverflowRefillBucket{capacity: capacity, transient: transient, throttled: throttled, bonus: bonus, perSec: perSec,
		clock: clock, milli: capacity, last: int64(clock.Now())}
}

// refilled returns the balance, fraction and instant at the clock reading now.
func (b *OverflowRefillBucket) refilled(now int64) (milli, frac, last int64) {
	if now <= b.last {
		return b.milli, b.frac, b.last
	}
	acc := b.frac + (now-b.last)*b.perSec
	if add := acc / nsPerSec; add < b.capacity-b.milli {
		return b.milli + add, acc % nsPerSec, now
	}
	return b.capacity, 0, now
}

// refill brings the balance to the clock's reading. b.mu is held.
func (b *OverflowRefillBucket) refill() {
	b.milli, b.frac, b.last = b.refilled(int64(b.clock.Now()))
}

// Request does nothing.
func (b *OverflowRefillBucket) Request() {}

// Retry refills, then withdraws the cost of k if the balance covers it.
func (b *OverflowRefillBucket) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	cost := b.transient
	if k == budget.Throttled {
		cost = b.throttled
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill()
	if b.milli < cost {
		return false
	}
	b.milli -= cost
	return true
}

// Success refills, then credits the refund or the bonus, up to capacity.
func (b *OverflowRefillBucket) Success(k budget.Kind) {
	credit := b.bonus
	switch k {
	case budget.Transient:
		credit = b.transient
	case budget.Throttled:
		credit = b.throttled
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill()
	if b.milli += credit; b.milli >= b.capacity {
		b.milli, b.frac = b.capacity, 0
	}
}

// Available returns the balance in tokens as of now, changing nothing.
func (b *OverflowRefillBucket) Available() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	m, _, _ := b.refilled(int64(b.clock.Now()))
	return float64(m) / 1000
}

// Compile-time checks.
var (
	_ budget.Budget = (*NegativeRefillBucket)(nil)
	_ budget.Budget = (*RetryOnlyBaseBucket)(nil)
	_ budget.Budget = (*OverflowRefillBucket)(nil)
)
