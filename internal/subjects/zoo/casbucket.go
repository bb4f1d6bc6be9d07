package zoo

import (
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
)

// CASBucket is a lock-free token bucket without refill: the balance is one
// atomic.Int64 updated by compare-and-swap loops.
type CASBucket struct {
	p     bucketParams
	milli atomic.Int64
}

// NewCASBucket returns a full bucket.
func NewCASBucket(capacity, transient, throttled, bonus int64) *CASBucket {
	b := &CASBucket{p: bucketParams{capacity, transient, throttled, bonus}}
	b.milli.Store(capacity)
	return b
}

func (b *CASBucket) Request() {}

func (b *CASBucket) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	c := b.p.cost(k)
	for {
		old := b.milli.Load()
		if old < c {
			return false // linearizes at the Load
		}
		if b.milli.CompareAndSwap(old, old-c) {
			return true
		}
	}
}

func (b *CASBucket) Success(k budget.Kind) {
	c := b.p.credit(k)
	for {
		old := b.milli.Load()
		nu := min(old+c, b.p.capacity)
		if nu == old || b.milli.CompareAndSwap(old, nu) {
			return
		}
	}
}

// Available returns the balance in tokens.
func (b *CASBucket) Available() float64 { return float64(b.milli.Load()) / 1000 }
