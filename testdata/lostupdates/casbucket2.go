package lostupdates

import (
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
)

// CASBucket2 is the second revision of the team's lock-free AWS retry
// quota (model.AWS()): one atomic.Int64 of milli-tokens. Retry, the path
// that must never overdraw, is a compare-and-swap loop. Success was
// simplified to "load, add, clamp, store" on the grounds that a deposit
// can only make the bucket fuller, so a race could only cost a success
// bonus.
//
// BUG: Success is a plain Load then Store, not a compare-and-swap: a
// Retry that withdraws between them is overwritten (its charge is lost),
// as is a concurrent Success's deposit.
type CASBucket2 struct {
	p      bucketParams
	tokens atomic.Int64
}

// NewCASBucket2 returns a full CASBucket2. Quantities are in milli-tokens.
func NewCASBucket2(capacity, transientCost, throttledCost, successBonus int64) *CASBucket2 {
	b := &CASBucket2{p: bucketParams{capacity, transientCost, throttledCost, successBonus}}
	b.tokens.Store(capacity)
	return b
}

// Request does nothing.
func (b *CASBucket2) Request() {}

// Retry withdraws the cost of kind if the balance covers it.
func (b *CASBucket2) Retry(kind budget.Kind) bool {
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
func (b *CASBucket2) Success(kind budget.Kind) {
	b.tokens.Store(min(b.tokens.Load()+b.p.credit(kind), b.p.capacity))
}

// Available returns the balance in tokens, for metrics.
func (b *CASBucket2) Available() float64 { return float64(b.tokens.Load()) / milli }
