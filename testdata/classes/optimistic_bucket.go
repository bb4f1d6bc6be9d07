package classes

import (
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// OptimisticUndoBucket is a token bucket without refill kept in one atomic
// word, whose Retry charges first and asks later: it subtracts the cost
// with one atomic add and, when that leaves the balance negative, adds the
// cost back and denies. Success is a compare-and-swap loop that clamps at
// the capacity.
//
// Class 4, token bucket family, on a bucket whose retries all cost the same
// (model.TokenBucket{Capacity: 10_000, TransientCost: 1_000,
// ThrottledCost: 1_000, SuccessBonus: 100}: 10 tokens, 1 a retry, a tenth
// of a token a success). With AWS's two costs a single cheaper retry
// landing in the window would already be denied wrongly; with one cost a
// single interfering call is harmless: a retry in the window is denied, as
// it would be in the order that puts it first, and a success is added
// before the undo and kept.
//
// Bug: between the charge and its undo the balance holds a charge that
// never happened, and it takes two calls of other goroutines, one that
// brings the balance up to a retry's cost and one that asks for that retry,
// to turn it into a wrong answer. From 0 tokens:
//
//	g1: Retry(transient): balance 0 - 1 = -1 < 0
//	g2: Success(transient): -1 + 1 = 0
//	g2: Retry(transient): 0 - 1 = -1 < 0, undone (0) → denied
//	g1: undo: 0 + 1 = 1 → denied
//
// g2's success is complete before its retry, which then finds 1 token in
// every order and the model grants it (an under-grant); the bucket is left
// with the token. The wrong answer needs g1 preempted between its charge and
// its undo while g2 makes two calls (testHook point "optimistic.bucket.undo").
type OptimisticUndoBucket struct {
	capacity int64
	cost     [3]int64
	bonus    int64
	tokens   atomic.Int64 // milli-tokens
}

// NewOptimisticUndoBucket returns a full bucket with m's parameters; m must
// not refill.
func NewOptimisticUndoBucket(m model.TokenBucket) *OptimisticUndoBucket {
	if m.RefillPerSecond != 0 || m.NoRefund {
		panic("OptimisticUndoBucket: no refill and no NoRefund")
	}
	b := &OptimisticUndoBucket{capacity: m.Capacity, cost: [3]int64{0, m.TransientCost, m.ThrottledCost}, bonus: m.SuccessBonus}
	b.tokens.Store(m.Capacity)
	return b
}

// Request does nothing.
func (b *OptimisticUndoBucket) Request() {}

// Retry charges the cost of a retry, and undoes the charge and denies when
// the balance did not cover it.
func (b *OptimisticUndoBucket) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	c := b.cost[kind]
	if b.tokens.Add(-c) >= 0 {
		return true
	}
	hook("optimistic.bucket.undo")
	b.tokens.Add(c)
	return false
}

// Success refunds a retry's cost, or deposits the bonus, up to capacity.
func (b *OptimisticUndoBucket) Success(kind budget.Kind) {
	c := b.bonus
	if kind.IsRetry() {
		c = b.cost[kind]
	}
	for {
		t := b.tokens.Load()
		n := min(t+c, b.capacity)
		if n == t || b.tokens.CompareAndSwap(t, n) {
			return
		}
	}
}

// Available returns the balance in tokens.
func (b *OptimisticUndoBucket) Available() float64 {
	return float64(b.tokens.Load()) / milli
}
