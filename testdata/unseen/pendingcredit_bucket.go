package unseen

import (
	"sync"
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// PendingCreditBucket is a correct AWS-style retry quota (model.AWS(), no
// refill) whose hot path, Success, takes no lock: a deposit is one atomic
// add to a pending counter. The balance proper is guarded by a mutex, and
// every call that reads it (Retry, Available) first folds the pending
// credits in, clamped at the capacity, under the lock.
//
// Why it is correct: a deposit takes effect at its atomic add, and deposits
// commute with one another and with the clamp (min(min(a+x, C)+y, C) =
// min(a+x+y, C) for x, y >= 0), so folding them later, before anything reads
// the balance, gives the balance the model has after the same deposits in
// the same places. A Retry swaps the pending credits out under the lock
// and decides on the sum, so a deposit that lands after its swap is simply
// ordered after the Retry. A Success that finds the pending credits above
// the capacity folds them itself if the lock is free, to keep the counter
// small.
type PendingCreditBucket struct {
	m       model.TokenBucket
	pending atomic.Int64 // milli-tokens deposited and not yet folded in

	mu     sync.Mutex
	tokens int64 // milli-tokens
}

// NewPendingCreditBucket returns a full bucket following m, which must have
// no refill.
func NewPendingCreditBucket(m model.TokenBucket) *PendingCreditBucket {
	return &PendingCreditBucket{m: m, tokens: m.Capacity}
}

// foldLocked folds the pending credits into the balance. b.mu must be held.
func (b *PendingCreditBucket) foldLocked() {
	if p := b.pending.Swap(0); p != 0 {
		b.tokens = min(b.tokens+p, b.m.Capacity)
	}
}

// Request does nothing: a first attempt is free.
func (b *PendingCreditBucket) Request() {}

// Retry withdraws the cost of a retry of kind k when the balance covers it.
func (b *PendingCreditBucket) Retry(k budget.Kind) bool {
	c := cost(b.m, k)
	if c == 0 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.foldLocked()
	if b.tokens < c {
		return false
	}
	b.tokens -= c
	return true
}

// Success deposits the credit of kind k.
func (b *PendingCreditBucket) Success(k budget.Kind) {
	cr := credit(b.m, k)
	if cr == 0 {
		return
	}
	if b.pending.Add(cr) > b.m.Capacity && b.mu.TryLock() {
		b.foldLocked()
		b.mu.Unlock()
	}
}

// Available returns the balance in tokens, pending credits included.
func (b *PendingCreditBucket) Available() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.foldLocked()
	return float64(b.tokens) / milli
}
