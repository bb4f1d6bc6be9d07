package classes

import (
	"sync"
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// CachedLimitRatio is LateLimitRatio with the cache kept consistent: a
// sliding-window ratio budget, under a mutex, that caches its allowance in
// an atomic. Correct: every store of the cache happens under the mutex,
// right after the change of the window it follows, and Retry reads it under
// the mutex, so the cache always holds the allowance of the window as it
// is.
type CachedLimitRatio struct {
	m     model.Ratio
	clock budget.Clock

	mu    sync.Mutex
	w     window
	limit atomic.Int64
}

// NewCachedLimitRatio returns an empty budget with m's parameters reading
// clock.
func NewCachedLimitRatio(m model.Ratio, clock budget.Clock) *CachedLimitRatio {
	r := &CachedLimitRatio{m: m, clock: clock, w: newWindow(m, clock.Now())}
	r.limit.Store(ratioLimit(m, 0))
	return r
}

func (r *CachedLimitRatio) slide() {
	if r.w.observe(r.clock.Now()) {
		r.limit.Store(ratioLimit(r.m, r.w.reqs))
	}
}

// Request counts a request.
func (r *CachedLimitRatio) Request() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.slide()
	r.w.addReq()
	r.limit.Store(ratioLimit(r.m, r.w.reqs))
}

// Retry grants and counts a retry while the cached limit allows one more.
func (r *CachedLimitRatio) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.slide()
	if r.w.tries+1 > r.limit.Load() {
		return false
	}
	r.w.addRetry()
	return true
}

// Success does nothing.
func (r *CachedLimitRatio) Success(budget.Kind) {}

// Available returns how many more retries the window would grant now.
func (r *CachedLimitRatio) Available() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	reqs, tries := r.w.peek(r.clock.Now())
	return ifAvailable(ratioLimit(r.m, reqs), tries)
}
