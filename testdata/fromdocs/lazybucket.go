package fromdocs

import (
	"sync"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// LazyModel is the rule LazyBucket follows: 25 tokens, 5 per transient
// retry, 2.5 per throttled one, the cost back on a successful retry, 0.5
// per successful first attempt, and a slow refill of 0.007 tokens a
// second, so that fractions of a milli-token matter.
var LazyModel = model.TokenBucket{Capacity: 25_000, TransientCost: 5_000, ThrottledCost: 2_500, SuccessBonus: 500, RefillPerSecond: 7}

// LazyBucket is a token bucket with refill (model.TokenBucket) under one
// sync.Mutex. It keeps the latest clock reading it has seen as an int64 of
// nanoseconds and refills lazily, on each call that observes the clock,
// for the time since then; a reading behind it counts as it. Each call
// reads the clock once, inside the lock. Refill arithmetic is in int64:
// the fraction of a milli-token is carried in units of 1e-9, and a step
// long enough to fill the bucket is found by comparing the elapsed time
// with the time the refill needs, so nothing overflows.
//
// Linearizability: every call that reads or changes the state holds mu
// for its whole read-modify-write and reads the clock inside it, so the
// calls are totally ordered and each takes effect at one instant inside
// its critical section, on the clock reading it took there.
type LazyBucket struct {
	capacity, bonus, rate int64
	cost                  [3]int64 // by kind
	noRefund              bool
	clock                 budget.Clock

	mu     sync.Mutex
	tokens int64 // milli-tokens
	frac   int64 // part of a milli-token, in units of 1e-9
	lastNs int64 // latest clock reading seen, in nanoseconds
}

// NewLazy returns a full bucket following m, on clock c; m must refill.
func NewLazy(m model.TokenBucket, c budget.Clock) *LazyBucket {
	if m.RefillPerSecond <= 0 {
		panic("fromdocs: LazyBucket needs a refill")
	}
	return &LazyBucket{capacity: m.Capacity, bonus: m.SuccessBonus, rate: m.RefillPerSecond,
		cost: [3]int64{0, m.TransientCost, m.ThrottledCost}, noRefund: m.NoRefund, clock: c,
		tokens: m.Capacity, lastNs: int64(c.Now())}
}

// refilled returns the balance, fraction and latest reading after
// refilling from the state given to the reading now.
func (b *LazyBucket) refilled(tokens, frac, last, now int64) (int64, int64, int64) {
	if now <= last {
		return tokens, frac, last
	}
	elapsed := uint64(now) - uint64(last) // exact even where now-last overflows
	if tokens >= b.capacity {
		return b.capacity, 0, now
	}
	need := (b.capacity-tokens)*int64(nsPerSecond) - frac // > 0, at most 1e18
	if elapsed >= uint64((need+b.rate-1)/b.rate) {
		return b.capacity, 0, now
	}
	acc := frac + int64(elapsed)*b.rate // < frac + need: no overflow
	return tokens + acc/int64(nsPerSecond), acc % int64(nsPerSecond), now
}

func (b *LazyBucket) refillLocked() {
	b.tokens, b.frac, b.lastNs = b.refilled(b.tokens, b.frac, b.lastNs, int64(b.clock.Now()))
}

// Request does nothing.
func (b *LazyBucket) Request() {}

// Retry withdraws the retry's cost when the balance covers it.
func (b *LazyBucket) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refillLocked()
	if b.tokens < b.cost[kind] {
		return false
	}
	b.tokens -= b.cost[kind]
	return true
}

// Success deposits the refund of a successful retry, or the bonus.
func (b *LazyBucket) Success(kind budget.Kind) {
	credit := b.bonus
	if kind.IsRetry() && !b.noRefund {
		credit = b.cost[kind]
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refillLocked()
	b.tokens += credit
	if b.tokens >= b.capacity {
		b.tokens, b.frac = b.capacity, 0
	}
}

// Available returns the balance in tokens as of now. It changes nothing.
func (b *LazyBucket) Available() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, _, _ := b.refilled(b.tokens, b.frac, b.lastNs, int64(b.clock.Now()))
	return float64(t) / 1000
}
