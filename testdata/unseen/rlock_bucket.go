package unseen

import (
	"sync"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// RLockBucket is an AWS-style retry quota (model.AWS()) guarded by a
// sync.RWMutex. Retry, which can overspend, takes the write lock. Success
// only deposits, and its author reasoned that a deposit can never
// overspend, so it takes the read lock to let the many successes of a
// healthy service run in parallel.
//
// The bug: a lost update from a plain read-modify-write under a read lock.
// Two Successes hold the read lock at once and both read-modify-write the
// same int64. With 100 tokens:
//
//  1. goroutine A, in Success(Transient), takes the read lock and reads
//     100 (hook "rlock.success", between the read and the write);
//  2. goroutine B runs all of Success(Throttled) under its own read lock:
//     reads 100, writes 105;
//  3. A writes 100 + 14 = 114 and releases its read lock.
//
// Wrong outcome: lost credit (under-grant, wrong balance). The bucket holds
// 114 tokens where every order leaves 119; B's refund is gone, and the
// bucket later denies retries its model grants. Under -race this is also a
// data race (two writes under read locks).
type RLockBucket struct {
	m      model.TokenBucket
	mu     sync.RWMutex
	tokens int64 // milli-tokens
}

// NewRLockBucket returns a full bucket following m, which must have no
// refill.
func NewRLockBucket(m model.TokenBucket) *RLockBucket {
	return &RLockBucket{m: m, tokens: m.Capacity}
}

// Request does nothing: a first attempt is free.
func (b *RLockBucket) Request() {}

// Retry withdraws the cost of a retry of kind k when the balance covers it.
func (b *RLockBucket) Retry(k budget.Kind) bool {
	c := cost(b.m, k)
	if c == 0 {
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

// Success deposits the credit of kind k, up to the capacity.
func (b *RLockBucket) Success(k budget.Kind) {
	cr := credit(b.m, k)
	b.mu.RLock() // a deposit cannot overspend
	t := b.tokens
	hook("rlock.success")
	b.tokens = min(t+cr, b.m.Capacity)
	b.mu.RUnlock()
}

// Available returns the balance in tokens.
func (b *RLockBucket) Available() float64 {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return float64(b.tokens) / milli
}
