package unseen

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// RecheckRatio is a fixed-window ratio budget (model.Ratio with Slots = 1:
// 10% of the requests of the current one-second window, with a floor of 3)
// guarded by a mutex, with the window's number kept in an atomic so that
// the common case, a call in the window already current, takes the lock
// only once. A call that finds its window newer than the current one rolls
// the window over: it takes the lock, makes its window current and zeroes
// the counts. Then it takes the lock again to count.
//
// The bug: double-checked locking done wrong. The roll-over checks the
// window number without the lock and does not check it again once it holds
// the lock, so two calls that both saw the old window both roll it over,
// and the second zeroes what the first already counted in the new window.
// With the clock just past a window boundary:
//
//  1. goroutine A, in Request, sees that its window is newer than the
//     current one (hook "recheck.stale", before taking the lock);
//  2. goroutine B runs all of Request: sees the same, rolls the window
//     over, counts its request (1 request);
//  3. A takes the lock, rolls the window over again, zeroing B's request,
//     and counts its own (1 request).
//
// Wrong outcome: lost credit (under-grant). The window holds 1 request
// where every order counts 2; with forty requests racing the boundary, the
// window can keep a handful of them and allow 3 retries where the model
// allows 4. A Retry that races the roll-over loses its count the same way,
// which over-grants.
type RecheckRatio struct {
	m     model.Ratio
	width int64
	clock budget.Clock

	cur atomic.Int64 // number of the current window

	mu            sync.Mutex
	reqs, retries int64
}

// NewRecheckRatio returns an empty window following m (whose Slots must be
// 1), on clock.
func NewRecheckRatio(m model.Ratio, clock budget.Clock) *RecheckRatio {
	r := &RecheckRatio{m: m, width: int64(m.Window), clock: clock}
	r.cur.Store(floorDiv(int64(clock.Now()), r.width))
	return r
}

// roll makes the window of now current if it is newer.
func (r *RecheckRatio) roll(now time.Duration) {
	n := floorDiv(int64(now), r.width)
	if n > r.cur.Load() {
		hook("recheck.stale")
		r.mu.Lock()
		r.cur.Store(n)
		r.reqs, r.retries = 0, 0
		r.mu.Unlock()
	}
}

// Request counts a request in the current window.
func (r *RecheckRatio) Request() {
	r.roll(r.clock.Now())
	r.mu.Lock()
	r.reqs++
	r.mu.Unlock()
}

// Retry grants a retry while the window allows one more, and counts it.
func (r *RecheckRatio) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	r.roll(r.clock.Now())
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.retries >= ratioLimit(r.m, r.reqs) {
		return false
	}
	r.retries++
	return true
}

// Success does nothing: a ratio recovers as its window slides.
func (r *RecheckRatio) Success(budget.Kind) {}

// Available returns the retries the window would still grant now.
func (r *RecheckRatio) Available() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	reqs, retries := r.reqs, r.retries
	if floorDiv(int64(r.clock.Now()), r.width) > r.cur.Load() {
		reqs, retries = 0, 0
	}
	limit := ratioLimit(r.m, reqs)
	if retries >= limit {
		return 0
	}
	return float64(limit - retries)
}
