package designs

import (
	"sync"

	"github.com/retrybudget/retrybudget/budget"
)

// RWBucket is a token bucket without refill (the AWS SDK's retry quota, in
// its shape) under a sync.RWMutex, with a read-locked fast path for the
// answer a drained bucket gives most: a denial. Retry first takes the read
// lock, and denies at once when the balance is short of the retry's cost;
// otherwise it lets the read lock go, takes the write lock, and checks
// again, since another call may have withdrawn in between, before it
// withdraws. Success deposits under the write lock.
//
// The bucket has no refill on purpose: with refill, a denial observes the
// clock and must keep the latest reading (a clock stepped back afterwards
// must not refill that interval again), so a denial is a write and has no
// read-only fast path. NewRWBucket panics on a refill rate.
//
// Linearizability: the balance is written only under the write lock. A
// fast denial holds the read lock from its load to its answer, so no write
// happens in between: it is linearized at its load, where the balance was
// short, and a short balance makes the model deny and change nothing. A
// write-locked Retry or Success is linearized anywhere in its critical
// section; the recheck there decides on the balance of that moment, never
// on the one the read lock saw. A retry of a kind that is not a retry kind
// takes no lock.
type RWBucket struct {
	cfg BucketConfig

	mu     sync.RWMutex
	tokens int64 // milli-tokens; written under mu's write lock
}

var _ budget.Budget = (*RWBucket)(nil)

// NewRWBucket returns a full RWBucket. cfg.RefillPerSecond must be 0.
func NewRWBucket(cfg BucketConfig) *RWBucket {
	if cfg.RefillPerSecond != 0 {
		panic("designs: RWBucket has no refill")
	}
	return &RWBucket{cfg: cfg, tokens: cfg.Capacity}
}

// Request does nothing: a first attempt is free.
func (b *RWBucket) Request() {}

// Retry withdraws the cost of a retry of kind k and reports true, or
// reports false when the balance is short. A kind that is not a retry kind
// is denied.
func (b *RWBucket) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	c := b.cfg.cost(k)
	b.mu.RLock()
	short := b.tokens < c
	b.mu.RUnlock()
	if short {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tokens < c {
		return false
	}
	b.tokens -= c
	return true
}

// Success deposits the credit of a success of kind k, up to the capacity.
func (b *RWBucket) Success(k budget.Kind) {
	b.mu.Lock()
	b.tokens = min(b.tokens+b.cfg.credit(k), b.cfg.Capacity)
	b.mu.Unlock()
}

// Available returns the balance in tokens.
func (b *RWBucket) Available() float64 {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return float64(b.tokens) / milli
}
