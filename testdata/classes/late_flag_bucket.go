package classes

import (
	"sync"
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// LateEmptyFlagBucket is a token bucket without refill, under a mutex, with
// a lock-free fast path for outages: a flag, empty, says the balance cannot
// pay for even the cheaper retry, and Retry denies at once, without the
// lock, while it is set. Every call that changes the balance computes the
// flag under the mutex, but stores it after the unlock, to keep the
// critical section short.
//
// Class 2, token bucket family (model.AWS()).
//
// Bug: the flag is published outside the critical section, so a stale
// value can overwrite a fresh one. From 9 tokens:
//
//	g1: Retry(throttled): lock, 9 → 4 tokens, granted, empty' = true, unlock
//	g2: Success(throttled): lock, 4 → 9 tokens, empty' = false, unlock, store empty = false
//	g1: store empty = true
//	g2: Retry(throttled): empty is set → denied
//
// The bucket holds 9 tokens but says it is empty: every retry is denied, by
// the fast path, until a success stores the flag again. Every order of the
// first two calls leaves 9 tokens, from which the model grants the last
// retry (an under-grant). The wrong answer needs g1 preempted between its
// unlock and its store (testHook point "lateflag.bucket.publish").
type LateEmptyFlagBucket struct {
	capacity int64
	cost     [3]int64
	bonus    int64
	least    int64 // the cheaper retry's cost

	mu     sync.Mutex
	tokens int64 // milli-tokens; guarded by mu
	empty  atomic.Bool
}

// NewLateEmptyFlagBucket returns a full bucket with m's parameters; m must
// not refill.
func NewLateEmptyFlagBucket(m model.TokenBucket) *LateEmptyFlagBucket {
	if m.RefillPerSecond != 0 || m.NoRefund {
		panic("LateEmptyFlagBucket: no refill and no NoRefund")
	}
	return &LateEmptyFlagBucket{
		capacity: m.Capacity,
		cost:     [3]int64{0, m.TransientCost, m.ThrottledCost},
		bonus:    m.SuccessBonus,
		least:    min(m.TransientCost, m.ThrottledCost),
		tokens:   m.Capacity,
	}
}

// Request does nothing.
func (b *LateEmptyFlagBucket) Request() {}

// Retry withdraws the cost of a retry when the balance covers it.
func (b *LateEmptyFlagBucket) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	if b.empty.Load() {
		return false // fast path: nothing to pay even the cheaper retry with
	}
	b.mu.Lock()
	granted := b.tokens >= b.cost[kind]
	if granted {
		b.tokens -= b.cost[kind]
	}
	empty := b.tokens < b.least
	b.mu.Unlock()
	hook("lateflag.bucket.publish")
	b.empty.Store(empty)
	return granted
}

// Success refunds a retry's cost, or deposits the bonus, up to capacity.
func (b *LateEmptyFlagBucket) Success(kind budget.Kind) {
	c := b.bonus
	if kind.IsRetry() {
		c = b.cost[kind]
	}
	b.mu.Lock()
	b.tokens = min(b.tokens+c, b.capacity)
	empty := b.tokens < b.least
	b.mu.Unlock()
	hook("lateflag.bucket.publish")
	b.empty.Store(empty)
}

// Available returns the balance in tokens.
func (b *LateEmptyFlagBucket) Available() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return float64(b.tokens) / milli
}
