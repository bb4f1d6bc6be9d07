package external

import "sync/atomic"

// FastQuota is Quota without the mutex, as a team might speed it up: an
// atomic balance. Acquire loads the balance, compares, then subtracts: two
// goroutines that both load a balance of 14 both take 14. The race detector
// sees nothing wrong (every access is atomic); a check against the model,
// under a schedule that switches between the load and the subtraction,
// does.
type FastQuota struct {
	tokens   atomic.Int64
	capacity int64
}

// NewFastQuota returns a full FastQuota.
func NewFastQuota(capacity int) *FastQuota {
	q := &FastQuota{capacity: int64(capacity)}
	q.tokens.Store(int64(capacity))
	return q
}

// Acquire takes cost tokens if there are that many (but see FastQuota).
func (q *FastQuota) Acquire(cost int) bool {
	if q.tokens.Load() < int64(cost) {
		return false
	}
	q.tokens.Add(-int64(cost))
	return true
}

// Release gives n tokens back, up to the capacity.
func (q *FastQuota) Release(n int) {
	for {
		old := q.tokens.Load()
		if q.tokens.CompareAndSwap(old, min(old+int64(n), q.capacity)) {
			return
		}
	}
}
