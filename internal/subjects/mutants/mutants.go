package mutants

import (
	"sync"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// UnclampedRefund is a token bucket whose successful retries refund their
// cost without the clamp to capacity, so a run of successful retries grows
// the balance past Capacity and later funds more retries than the bucket can
// hold. The first-attempt bonus is still clamped, which is how the bug hides:
// the common path looks right. It supports no refill.
//
// Bug class: a missing clamp on one of several deposit paths. Caught by the
// sequential check.
type UnclampedRefund struct {
	mu     sync.Mutex
	m      model.TokenBucket
	tokens int64
}

var _ budget.Budget = (*UnclampedRefund)(nil)

// NewUnclampedRefund returns a full UnclampedRefund for m, which must have no
// refill.
func NewUnclampedRefund(m model.TokenBucket) *UnclampedRefund {
	return &UnclampedRefund{m: m, tokens: m.Capacity}
}

func (b *UnclampedRefund) Request() {}

func (b *UnclampedRefund) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	c := bucketCost(b.m, k)
	if b.tokens < c {
		return false
	}
	b.tokens -= c
	return true
}

func (b *UnclampedRefund) Success(k budget.Kind) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if k.IsRetry() && !b.m.NoRefund {
		b.tokens += bucketCost(b.m, k) // BUG: no clamp to Capacity
		return
	}
	b.tokens = min(b.tokens+b.m.SuccessBonus, b.m.Capacity)
}

func bucketCost(m model.TokenBucket, k budget.Kind) int64 {
	if k == budget.Throttled {
		return m.ThrottledCost
	}
	return m.TransientCost
}
