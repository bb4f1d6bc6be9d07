package lostupdates

import (
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
)

// AddClampBucket is the AWS SDK's retry quota as a lock-free token bucket
// (model.AWS() with the default parameters): the balance lives in one
// atomic.Int64 of milli-tokens. Retry withdraws with a compare-and-swap
// loop, so the balance never goes below zero. Success deposits with a
// single atomic Add (the hot path of a healthy service: no loop, no
// contention) and then clamps the balance back to the capacity if the
// deposit overshot it.
//
// BUG: the clamp is a separate Store(capacity) after the Add: a Retry that
// withdraws between the Add and the Store is overwritten, so its charge
// is lost and the bucket reads full again.
type AddClampBucket struct {
	p      bucketParams
	tokens atomic.Int64
}

// NewAddClampBucket returns a full AddClampBucket. Quantities are in
// milli-tokens.
func NewAddClampBucket(capacity, transientCost, throttledCost, successBonus int64) *AddClampBucket {
	b := &AddClampBucket{p: bucketParams{capacity, transientCost, throttledCost, successBonus}}
	b.tokens.Store(capacity)
	return b
}

// Request does nothing.
func (b *AddClampBucket) Request() {}

// Retry withdraws the cost of kind if the balance covers it.
func (b *AddClampBucket) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	cost := b.p.cost(kind)
	for {
		cur := b.tokens.Load()
		if cur < cost {
			return false
		}
		if b.tokens.CompareAndSwap(cur, cur-cost) {
			return true
		}
	}
}

// Success deposits the refund or the bonus, up to the capacity.
func (b *AddClampBucket) Success(kind budget.Kind) {
	if v := b.tokens.Add(b.p.credit(kind)); v > b.p.capacity {
		b.tokens.Store(b.p.capacity)
	}
}

// Available returns the balance in tokens, for metrics.
func (b *AddClampBucket) Available() float64 {
	return float64(min(b.tokens.Load(), b.p.capacity)) / milli
}
