package lostupdates

import (
	"sync"
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
)

// CachedDenyBucket is the AWS retry quota (model.AWS()) as a mutex-guarded
// token bucket with a lock-free fast path for outages: when a denial finds
// the balance below the cheapest retry's cost, it raises a "dry" flag, and
// while the flag is up Retry denies without taking the lock (during an
// outage every caller is asking, and every answer is no). A Success that
// brings the balance back to the cheapest cost lowers the flag under the
// lock.
//
// BUG: the flag is raised after the mutex is released: a Success that
// refills the bucket and lowers the flag in between is overwritten, and
// the bucket stays "dry" (denying every retry) with tokens to pay for them
// until some later Success lowers the flag again.
type CachedDenyBucket struct {
	p       bucketParams
	minCost int64
	dry     atomic.Bool
	mu      sync.Mutex
	tokens  int64
}

// NewCachedDenyBucket returns a full CachedDenyBucket. Quantities are in
// milli-tokens.
func NewCachedDenyBucket(capacity, transientCost, throttledCost, successBonus int64) *CachedDenyBucket {
	return &CachedDenyBucket{
		p:       bucketParams{capacity, transientCost, throttledCost, successBonus},
		minCost: min(transientCost, throttledCost),
		tokens:  capacity,
	}
}

// Request does nothing.
func (b *CachedDenyBucket) Request() {}

// Retry withdraws the cost of kind if the balance covers it.
func (b *CachedDenyBucket) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	if b.dry.Load() {
		return false
	}
	cost := b.p.cost(kind)
	b.mu.Lock()
	if b.tokens < cost {
		dry := b.tokens < b.minCost
		b.mu.Unlock()
		if dry {
			b.dry.Store(true)
		}
		return false
	}
	b.tokens -= cost
	b.mu.Unlock()
	return true
}

// Success deposits the refund or the bonus, up to the capacity.
func (b *CachedDenyBucket) Success(kind budget.Kind) {
	b.mu.Lock()
	b.tokens = min(b.tokens+b.p.credit(kind), b.p.capacity)
	if b.tokens >= b.minCost {
		b.dry.Store(false)
	}
	b.mu.Unlock()
}

// Available returns the balance in tokens, for metrics.
func (b *CachedDenyBucket) Available() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return float64(b.tokens) / milli
}
