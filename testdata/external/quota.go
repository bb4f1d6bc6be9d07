// Package external is a budget written by someone else: a module that
// imports retrybudget only to test with it, the way a team puts its own
// retry budget through the conformance suite.
package external

import "sync"

// Quota is a plain retry quota: retries cost tokens, successful retries get
// them back, and a successful first attempt adds one, up to the capacity.
type Quota struct {
	mu       sync.Mutex
	tokens   int
	capacity int
}

// NewQuota returns a full Quota.
func NewQuota(capacity int) *Quota { return &Quota{tokens: capacity, capacity: capacity} }

// Acquire takes cost tokens if there are that many.
func (q *Quota) Acquire(cost int) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.tokens < cost {
		return false
	}
	q.tokens -= cost
	return true
}

// Release gives n tokens back, up to the capacity.
func (q *Quota) Release(n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.tokens = min(q.tokens+n, q.capacity)
}
