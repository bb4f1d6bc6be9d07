package unseen

import (
	"runtime"
	"sync"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// TryLockRatio is a correct sliding-window ratio budget (model.Ratio; its
// subject uses 25% over 2 s in 4 slots, a floor of 2 and a reserve of 1,
// Finagle's additive kind) in integer fixed point (parts per million, no
// floating point anywhere), guarded by a sync.Mutex taken with TryLock in a
// loop that yields with runtime.Gosched between tries, as code that must
// never park a goroutine on a lock might. Each call does all its work,
// the clock reading included, in one critical section.
type TryLockRatio struct {
	clock budget.Clock
	mu    sync.Mutex
	w     *window
}

// NewTryLockRatio returns an empty window following m, on clock.
func NewTryLockRatio(m model.Ratio, clock budget.Clock) *TryLockRatio {
	return &TryLockRatio{clock: clock, w: newWindow(m, clock.Now())}
}

func (r *TryLockRatio) lock() {
	for !r.mu.TryLock() {
		runtime.Gosched()
	}
}

// Request counts a request.
func (r *TryLockRatio) Request() {
	r.lock()
	defer r.mu.Unlock()
	r.w.request(r.clock.Now())
}

// Retry grants a retry while the window allows one more, and counts it.
func (r *TryLockRatio) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	r.lock()
	defer r.mu.Unlock()
	return r.w.retry(r.clock.Now())
}

// Success does nothing: a ratio recovers as its window slides.
func (r *TryLockRatio) Success(budget.Kind) {}

// Available returns the retries the window would still grant now.
func (r *TryLockRatio) Available() float64 {
	r.lock()
	defer r.mu.Unlock()
	return r.w.available(r.clock.Now())
}
