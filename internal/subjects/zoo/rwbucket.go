package zoo

import (
	"sync"

	"github.com/retrybudget/retrybudget/budget"
)

// RWBucket is a token bucket without refill guarded by a sync.RWMutex:
// writers (Retry, Success) take the write lock, Available the read lock.
type RWBucket struct {
	p     bucketParams
	mu    sync.RWMutex
	milli int64
}

// NewRWBucket returns a full bucket.
func NewRWBucket(capacity, transient, throttled, bonus int64) *RWBucket {
	return &RWBucket{p: bucketParams{capacity, transient, throttled, bonus}, milli: capacity}
}

func (b *RWBucket) Request() {}

func (b *RWBucket) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	c := b.p.cost(k)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.milli < c {
		return false
	}
	b.milli -= c
	return true
}

func (b *RWBucket) Success(k budget.Kind) {
	c := b.p.credit(k)
	b.mu.Lock()
	b.milli = min(b.milli+c, b.p.capacity)
	b.mu.Unlock()
}

// Available returns the balance in tokens.
func (b *RWBucket) Available() float64 {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return float64(b.milli) / 1000
}
