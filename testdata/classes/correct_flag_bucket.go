package classes

import (
	"sync"
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// EmptyFlagBucket is LateEmptyFlagBucket with the flag kept consistent: a
// token bucket without refill, under a mutex, whose Retry denies at once,
// without the lock, while a flag says the balance cannot pay even the
// cheaper retry. Correct: the flag is stored inside the critical section,
// after the balance, so outside a critical section it always matches the
// balance, and a writer inside one can be ordered at its flag store; a
// reader that sees the flag set denies on a state the bucket was in during
// its call.
type EmptyFlagBucket struct {
	capacity int64
	cost     [3]int64
	bonus    int64
	least    int64

	mu     sync.Mutex
	tokens int64 // milli-tokens; guarded by mu
	empty  atomic.Bool
}

// NewEmptyFlagBucket returns a full bucket with m's parameters; m must not
// refill.
func NewEmptyFlagBucket(m model.TokenBucket) *EmptyFlagBucket {
	if m.RefillPerSecond != 0 || m.NoRefund {
		panic("EmptyFlagBucket: no refill and no NoRefund")
	}
	return &EmptyFlagBucket{
		capacity: m.Capacity,
		cost:     [3]int64{0, m.TransientCost, m.ThrottledCost},
		bonus:    m.SuccessBonus,
		least:    min(m.TransientCost, m.ThrottledCost),
		tokens:   m.Capacity,
	}
}

// Request does nothing.
func (b *EmptyFlagBucket) Request() {}

// Retry withdraws the cost of a retry when the balance covers it.
func (b *EmptyFlagBucket) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	if b.empty.Load() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	granted := b.tokens >= b.cost[kind]
	if granted {
		b.tokens -= b.cost[kind]
	}
	b.empty.Store(b.tokens < b.least)
	return granted
}

// Success refunds a retry's cost, or deposits the bonus, up to capacity.
func (b *EmptyFlagBucket) Success(kind budget.Kind) {
	c := b.bonus
	if kind.IsRetry() {
		c = b.cost[kind]
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tokens = min(b.tokens+c, b.capacity)
	b.empty.Store(b.tokens < b.least)
}

// Available returns the balance in tokens.
func (b *EmptyFlagBucket) Available() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return float64(b.tokens) / milli
}
