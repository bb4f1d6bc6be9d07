package classes

import (
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// StaleLimitRatio is a sliding-window ratio budget kept copy-on-write: the
// window is an immutable value behind an atomic pointer, and every call
// copies it, changes the copy and publishes it with a compare-and-swap,
// trying again when another call published first. Retry computes the
// allowance, max(Floor, ⌊PPM × requests / 1e6⌋), once, from the window it
// loads first, and then runs its compare-and-swap loop against that limit,
// computing it again only when the window has slid to another head slot.
// Its authors reasoned that the requests in a slot only grow, so an old
// limit can only be lower than the current one, never too generous.
//
// Class 4, ratio family (model.SRE(): 10% of the last 10 s, at least 3).
//
// Bug: the loop compares the window's current retries against a limit
// computed from its old requests. One call of another goroutine in between
// is harmless: a request alone leaves the retries as they were, which the
// old limit judges as the old window would; a retry alone leaves the
// requests, and so the limit, as they were; a slide to another slot makes
// Retry compute the limit again. It takes two calls, a request that raises
// the limit and a retry that takes the new room, to part it from the model.
// With 39 requests and 2 retries in the window (limit 3):
//
//	g1: Retry: loads the window, limit 3
//	g2: Request: 40 requests (limit 4)
//	g2: Retry: 3 retries ≤ 4 → granted
//	g1: compare-and-swap loop: the window has 3 retries; 3 + 1 > 3 → denied
//
// In every order g1's retry is the 3rd or the 4th of a window of 39 or 40
// requests, and the model grants it (an under-grant). The wrong answer
// needs g1 preempted after it computed the limit while g2 makes two calls
// (testHook point "stale.ratio.limit").
type StaleLimitRatio struct {
	m     model.Ratio
	clock budget.Clock
	cur   atomic.Pointer[window] // never changed once published
}

// NewStaleLimitRatio returns an empty budget with m's parameters reading
// clock.
func NewStaleLimitRatio(m model.Ratio, clock budget.Clock) *StaleLimitRatio {
	r := &StaleLimitRatio{m: m, clock: clock}
	w := newWindow(m, clock.Now())
	r.cur.Store(&w)
	return r
}

// Request counts a request.
func (r *StaleLimitRatio) Request() {
	now := r.clock.Now()
	for {
		old := r.cur.Load()
		w := old.clone()
		w.observe(now)
		w.addReq()
		if r.cur.CompareAndSwap(old, w) {
			return
		}
	}
}

// Retry grants and counts a retry while the window allows one more.
func (r *StaleLimitRatio) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	now := r.clock.Now()
	first := r.cur.Load()
	head := first.slotOf(now)
	reqs, _ := first.peek(now)
	limit := ratioLimit(r.m, reqs)
	hook("stale.ratio.limit")
	for {
		old := r.cur.Load()
		w := old.clone()
		w.observe(now)
		if w.head != head { // the window slid: the requests may have gone
			head, limit = w.head, ratioLimit(r.m, w.reqs)
		}
		if w.tries+1 > limit {
			// Denied; publish only what observing the clock changed.
			if w.last == old.last || r.cur.CompareAndSwap(old, w) {
				return false
			}
			continue
		}
		w.addRetry()
		if r.cur.CompareAndSwap(old, w) {
			return true
		}
	}
}

// Success does nothing.
func (r *StaleLimitRatio) Success(budget.Kind) {}

// Available returns how many more retries the window would grant now.
func (r *StaleLimitRatio) Available() float64 {
	reqs, tries := r.cur.Load().peek(r.clock.Now())
	return ifAvailable(ratioLimit(r.m, reqs), tries)
}
