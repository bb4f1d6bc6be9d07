package classes

import (
	"sync"
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// LateLimitRatio is a sliding-window ratio budget, under a mutex, that
// caches its allowance, max(Floor, ⌊PPM × requests / 1e6⌋), in an atomic,
// so that Retry compares against a number instead of recomputing the
// product. A call that slides the window refreshes the cache under the
// mutex; Request, the hot path, computes the new allowance under the mutex
// and stores it after the unlock.
//
// Class 2, ratio family (model.SRE(): 10% of the last 10 s, at least 3).
//
// Bug: the cached limit is published outside the critical section, so a
// stale limit can overwrite a fresh one. With 38 requests in the window:
//
//	g1: Request: lock, 39 requests, limit' = 3, unlock
//	g2: Request: lock, 40 requests, limit' = 4, unlock, store limit = 4
//	g1: store limit = 3
//	g3: 4 retries: the 4th is denied (4 > 3)
//
// The window holds 40 requests, from which the model allows 4 retries
// whatever the order of the requests; the budget allows 3 until the next
// request stores the limit again (an under-grant). The wrong answer needs
// g1 preempted between its unlock and its store (testHook point
// "latelimit.ratio.publish").
type LateLimitRatio struct {
	m     model.Ratio
	clock budget.Clock

	mu    sync.Mutex
	w     window
	limit atomic.Int64 // the window's allowance, cached
}

// NewLateLimitRatio returns an empty budget with m's parameters reading
// clock.
func NewLateLimitRatio(m model.Ratio, clock budget.Clock) *LateLimitRatio {
	r := &LateLimitRatio{m: m, clock: clock, w: newWindow(m, clock.Now())}
	r.limit.Store(ratioLimit(m, 0))
	return r
}

// slide observes the clock and refreshes the cache when the window moved.
// r.mu must be held.
func (r *LateLimitRatio) slide() {
	if r.w.observe(r.clock.Now()) {
		r.limit.Store(ratioLimit(r.m, r.w.reqs))
	}
}

// Request counts a request.
func (r *LateLimitRatio) Request() {
	r.mu.Lock()
	r.slide()
	r.w.addReq()
	limit := ratioLimit(r.m, r.w.reqs)
	r.mu.Unlock()
	hook("latelimit.ratio.publish")
	r.limit.Store(limit)
}

// Retry grants and counts a retry while the cached limit allows one more.
func (r *LateLimitRatio) Retry(kind budget.Kind) bool {
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
func (r *LateLimitRatio) Success(budget.Kind) {}

// Available returns how many more retries the window would grant now,
// computed from the window itself.
func (r *LateLimitRatio) Available() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	reqs, tries := r.w.peek(r.clock.Now())
	return ifAvailable(ratioLimit(r.m, reqs), tries)
}
