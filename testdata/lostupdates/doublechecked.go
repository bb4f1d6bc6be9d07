package lostupdates

import (
	"sync"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

// DoubleCheckedRatio is the SRE ratio budget (model.SRE()) written around
// one helper, allowance(now), that slides the window under the mutex and
// returns how many more retries it allows; the same helper backs the
// metrics gauge. Retry asks it first and returns a denial without touching
// the counts; only when there is room does it take the mutex again to
// record the retry in the current slot.
//
// BUG: check-then-act: the allowance is read under one lock hold and the
// retry recorded under another, so concurrent Retrys that all saw the last
// free retry are all granted and all recorded.
type DoubleCheckedRatio struct {
	clock budget.Clock
	mu    sync.Mutex
	ring  ratioRing
}

// NewDoubleCheckedRatio returns an empty window on clock: ppm parts per
// million of the requests in the window, at least floor retries.
func NewDoubleCheckedRatio(ppm int64, window time.Duration, slots int, floor int64, clock budget.Clock) *DoubleCheckedRatio {
	return &DoubleCheckedRatio{clock: clock, ring: newRatioRing(ppm, window, slots, floor, clock.Now())}
}

// allowance slides the window to now and returns how many more retries it
// allows.
func (r *DoubleCheckedRatio) allowance(now time.Duration) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ring.current(now)
	return r.ring.left()
}

// Request counts a request in the current slot.
func (r *DoubleCheckedRatio) Request() {
	now := r.clock.Now()
	r.mu.Lock()
	r.ring.current(now).reqs++
	r.ring.reqs++
	r.mu.Unlock()
}

// Retry grants a retry while the window allows one more, and counts it.
func (r *DoubleCheckedRatio) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	now := r.clock.Now()
	if r.allowance(now) <= 0 {
		return false
	}
	r.mu.Lock()
	r.ring.current(now).retries++
	r.ring.retries++
	r.mu.Unlock()
	return true
}

// Success does nothing: the window recovers as it slides.
func (r *DoubleCheckedRatio) Success(budget.Kind) {}

// Available returns how many more retries the window would grant now.
func (r *DoubleCheckedRatio) Available() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ring.available(r.clock.Now())
}
