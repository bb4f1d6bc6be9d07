package lostupdates

import (
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
)

// RefundClampBucket is a small lock-free token bucket (10 tokens, 1 per
// transient retry, 0.5 per throttled retry, 0.1 per successful first
// attempt, refunds of successful retries, no refill). The balance is one
// atomic.Int64 of milli-tokens; Retry withdraws with a compare-and-swap
// loop. Success works out how much of the credit fits under the capacity
// and adds just that delta with an atomic Add, so that the balance is never
// seen above the capacity (unlike an Add-then-clamp).
//
// BUG: the delta is computed from an earlier Load: a Retry (or another
// Success) between the Load and the Add makes the delta wrong, so the
// bucket ends above the capacity, or a credit is cut short against a
// balance that has already dropped.
type RefundClampBucket struct {
	p      bucketParams
	tokens atomic.Int64
}

// NewRefundClampBucket returns a full RefundClampBucket. Quantities are in
// milli-tokens.
func NewRefundClampBucket(capacity, transientCost, throttledCost, successBonus int64) *RefundClampBucket {
	b := &RefundClampBucket{p: bucketParams{capacity, transientCost, throttledCost, successBonus}}
	b.tokens.Store(capacity)
	return b
}

// Request does nothing.
func (b *RefundClampBucket) Request() {}

// Retry withdraws the cost of kind if the balance covers it.
func (b *RefundClampBucket) Retry(kind budget.Kind) bool {
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
func (b *RefundClampBucket) Success(kind budget.Kind) {
	cur := b.tokens.Load()
	n := min(cur+b.p.credit(kind), b.p.capacity)
	if n != cur {
		b.tokens.Add(n - cur)
	}
}

// Available returns the balance in tokens, for metrics.
func (b *RefundClampBucket) Available() float64 { return float64(b.tokens.Load()) / milli }
