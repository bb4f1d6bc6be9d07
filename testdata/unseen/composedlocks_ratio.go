package unseen

import (
	"sync"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// ComposedLocksRatio is a sliding-window ratio budget (model.Ratio, the SRE
// book's 10% over 10 s in 10 slots with a floor of 3) guarded by a mutex.
// Its Retry is composed from two small methods that each lock correctly on
// their own: allowed, which slides the window and says whether one more
// retry fits, and record, which slides the window and counts a retry.
//
// The bug: a check-then-act split across two critical sections. Retry
// releases the lock between allowed and record, so two retries can both be
// allowed against the same count. With no requests and 2 retries in the
// window (the floor allows 3):
//
//  1. goroutine A, in Retry(Transient), runs allowed: 2 < 3, true
//     (hook "composed.allowed", between the two locks);
//  2. goroutine B runs all of Retry(Transient): allowed (2 < 3), record
//     (3 retries), true;
//  3. A runs record: 4 retries, and returns true.
//
// Wrong outcome: over-grant. Four retries in a window that allows three,
// where every order of the two calls grants one of them.
type ComposedLocksRatio struct {
	clock budget.Clock
	mu    sync.Mutex
	w     *window
}

// NewComposedLocksRatio returns an empty window following m, on clock.
func NewComposedLocksRatio(m model.Ratio, clock budget.Clock) *ComposedLocksRatio {
	return &ComposedLocksRatio{clock: clock, w: newWindow(m, clock.Now())}
}

// Request counts a request.
func (r *ComposedLocksRatio) Request() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.w.request(r.clock.Now())
}

// allowed reports whether one more retry fits in the window now.
func (r *ComposedLocksRatio) allowed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.w.current(r.clock.Now())
	return r.w.retries < ratioLimit(r.w.m, r.w.reqs)
}

// record counts a retry now.
func (r *ComposedLocksRatio) record() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.w.current(r.clock.Now()).retries++
	r.w.retries++
}

// Retry grants a retry while the window allows one more, and counts it.
func (r *ComposedLocksRatio) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	if !r.allowed() {
		return false
	}
	hook("composed.allowed")
	r.record()
	return true
}

// Success does nothing: a ratio recovers as its window slides.
func (r *ComposedLocksRatio) Success(budget.Kind) {}

// Available returns the retries the window would still grant now.
func (r *ComposedLocksRatio) Available() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.w.available(r.clock.Now())
}
