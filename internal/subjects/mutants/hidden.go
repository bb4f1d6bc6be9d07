package mutants

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// The mutants of this file hide from a suite that switches time off by
// omission, compares no balance, bounds grants from above only, puts a few
// hundred calls in a window, or jumps the clock by powers of two.

// refillBucket is a mutex-guarded token bucket in milli-tokens with a
// lazily computed refill; each mutant below writes its own refill.
type refillBucket struct {
	mu     sync.Mutex
	m      model.TokenBucket
	clock  budget.Clock
	tokens int64
	last   time.Duration
	refill func(b *refillBucket, now time.Duration)
}

func (b *refillBucket) Request() {}

func (b *refillBucket) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(b, b.clock.Now())
	c := bucketCost(b.m, k)
	if b.tokens < c {
		return false
	}
	b.tokens -= c
	return true
}

func (b *refillBucket) Success(k budget.Kind) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(b, b.clock.Now())
	credit := b.m.SuccessBonus
	if k.IsRetry() && !b.m.NoRefund {
		credit = bucketCost(b.m, k)
	}
	b.tokens = min(b.tokens+credit, b.m.Capacity)
}

// Available returns the balance in tokens.
func (b *refillBucket) Available() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(b, b.clock.Now())
	return float64(b.tokens) / 1000
}

// LostFraction is a refilling token bucket that rounds each refill down to
// a whole milli-token and moves its last-refill instant to now, so the
// fraction earned is thrown away on every read: under frequent calls it
// refills slower than its rate, and under calls more frequent than one
// milli-token's worth of time, never.
//
// Bug class: a refill fraction lost. A suite run with no clock steps (a
// subject that leaves Scale zero) cannot see it. Caught by the sequential
// check once the timing comes from the model.
type LostFraction struct{ refillBucket }

// NewLostFraction returns a full LostFraction for m on clock.
func NewLostFraction(m model.TokenBucket, clock budget.Clock) *LostFraction {
	b := &LostFraction{refillBucket{m: m, clock: clock, tokens: m.Capacity, last: clock.Now()}}
	b.refill = func(b *refillBucket, now time.Duration) {
		if now > b.last {
			earned := int64(now-b.last) / int64(time.Second/time.Nanosecond) * b.m.RefillPerSecond
			earned += int64(now-b.last) % int64(time.Second) * b.m.RefillPerSecond / int64(time.Second)
			b.tokens = min(b.tokens+earned, b.m.Capacity)
			b.last = now // BUG: the remainder below one milli-token is lost
		}
	}
	return b
}

// OverflowingRefill is a refilling token bucket that multiplies the
// nanoseconds elapsed by its rate in int64: after a gap longer than
// MaxInt64 / rate nanoseconds (106 days at 1000 milli-tokens a second) the
// product wraps, to a negative number the bucket then treats as nothing
// refilled, or to a small positive one.
//
// Bug class: overflow of elapsed × rate. Caught by the Replay check's
// jumps.
type OverflowingRefill struct{ refillBucket }

// NewOverflowingRefill returns a full OverflowingRefill for m on clock.
func NewOverflowingRefill(m model.TokenBucket, clock budget.Clock) *OverflowingRefill {
	b := &OverflowingRefill{refillBucket{m: m, clock: clock, tokens: m.Capacity, last: clock.Now()}}
	var frac int64
	b.refill = func(b *refillBucket, now time.Duration) {
		if now <= b.last {
			return
		}
		earned := int64(now-b.last)*b.m.RefillPerSecond + frac // BUG: wraps past MaxInt64
		b.last = now
		if earned <= 0 {
			return
		}
		b.tokens += earned / int64(time.Second)
		frac = earned % int64(time.Second)
		if b.tokens >= b.m.Capacity {
			b.tokens, frac = b.m.Capacity, 0
		}
	}
	return b
}

// LostCredit is a token bucket without refill whose Success reads the
// balance and then stores the credited one, each step atomic but the two
// not one: two successes at once both read the same balance, and one
// credit is lost. The race detector stays silent (every access is atomic),
// no grant is ever too many, and a bound from above never breaks: the
// budget just grants fewer retries than it should.
//
// Bug class: lost credits, a lower-bound violation. The Invariant check's
// bursts count grants both ways and see it when two successes overlap,
// which a busy two-core machine seldom lets them do; the linearizability
// check, whose small scenarios overlap more, is the one that must catch it.
type LostCredit struct {
	m      model.TokenBucket
	tokens atomic.Int64
}

// NewLostCredit returns a full LostCredit for m, which must have no refill.
func NewLostCredit(m model.TokenBucket) *LostCredit {
	b := &LostCredit{m: m}
	b.tokens.Store(m.Capacity)
	return b
}

func (b *LostCredit) Request() {}

func (b *LostCredit) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	c := bucketCost(b.m, k)
	for {
		t := b.tokens.Load()
		if t < c {
			return false
		}
		if b.tokens.CompareAndSwap(t, t-c) {
			return true
		}
	}
}

func (b *LostCredit) Success(k budget.Kind) {
	credit := b.m.SuccessBonus
	if k.IsRetry() && !b.m.NoRefund {
		credit = bucketCost(b.m, k)
	}
	t := b.tokens.Load()
	b.tokens.Store(min(t+credit, b.m.Capacity)) // BUG: a credit made in between is overwritten
}

// Available returns the balance in tokens.
func (b *LostCredit) Available() float64 { return float64(b.tokens.Load()) / 1000 }

// WrappingCount is a ratio budget that sums the requests of its window in
// a uint16, as a compact counter might: past 65,535 requests in a window
// the sum wraps, and the allowance collapses from thousands of retries to a
// handful.
//
// Bug class: a counter too narrow for the volume. No check that puts a few
// hundred calls in one window can see it; caught by the Replay check's
// volume replay and the Invariant check's volume bursts.
type WrappingCount struct{ *ratio }

var _ budget.Budget = WrappingCount{}

// NewWrappingCount returns an empty WrappingCount for m on clock.
func NewWrappingCount(m model.Ratio, clock budget.Clock) WrappingCount {
	r := newRatio(m, clock)
	r.requests = func(n int64) int64 { return int64(uint16(n)) } // BUG: wraps past 65,535
	return WrappingCount{r}
}
