package unseen

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// LateTotalRatio is a sliding-window ratio budget (model.Ratio, the SRE
// book's budget) whose slot ring is guarded by a mutex while the window's
// running totals are atomics, so that a metrics scraper can read them
// without the lock. Expiring a slot subtracts its counts from the totals
// under the lock; a new request or retry is counted in its slot under the
// lock, and added to the totals just after the lock is released, since the
// totals are atomic.
//
// The bug: a counter updated outside the mutex after unlock. A retry is
// decided under the lock from the totals, but the total of retries is
// raised only after the lock is released, so the next Retry can take the
// lock in between and decide against the old total. With no requests and 2
// retries in the window (the floor allows 3):
//
//  1. goroutine A, in Retry(Transient), under the lock sees 2 < 3, counts
//     the retry in its slot, releases the lock (hook "latetotal.unlocked",
//     before its atomic add to the total);
//  2. goroutine B runs all of Retry(Transient): under the lock the total
//     still reads 2 < 3, so it is granted, and the total becomes 3;
//  3. A adds its retry to the total: 4.
//
// Wrong outcome: over-grant. Four retries in a window that allows three;
// every order of the two calls grants one.
type LateTotalRatio struct {
	m     model.Ratio
	width int64
	clock budget.Clock

	mu    sync.Mutex
	last  time.Duration
	head  int64
	slots []slotCount

	reqs, retries atomic.Int64 // totals of the window
}

// NewLateTotalRatio returns an empty window following m, on clock.
func NewLateTotalRatio(m model.Ratio, clock budget.Clock) *LateTotalRatio {
	r := &LateTotalRatio{m: m, width: int64(m.Window) / m.Slots, clock: clock, slots: make([]slotCount, m.Slots)}
	r.last = clock.Now()
	r.head = floorDiv(int64(r.last), r.width)
	for i := range r.slots {
		r.slots[i].n = r.head - m.Slots
	}
	return r
}

// currentLocked slides the window to now and returns now's slot. r.mu must
// be held.
func (r *LateTotalRatio) currentLocked(now time.Duration) *slotCount {
	if now > r.last {
		r.last = now
		n := floorDiv(int64(now), r.width)
		size := uint64(len(r.slots))
		if uint64(n)-uint64(r.head) >= size {
			r.reqs.Store(0)
			r.retries.Store(0)
			r.head = n
		} else {
			for r.head != n {
				r.head++
				s := &r.slots[floorMod(r.head, int64(size))]
				if uint64(r.head-1)-uint64(s.n) < size {
					r.reqs.Add(-s.reqs)
					r.retries.Add(-s.retries)
				}
				*s = slotCount{n: r.head}
			}
		}
	}
	s := &r.slots[floorMod(r.head, int64(len(r.slots)))]
	if s.n != r.head {
		*s = slotCount{n: r.head}
	}
	return s
}

// Request counts a request.
func (r *LateTotalRatio) Request() {
	r.mu.Lock()
	r.currentLocked(r.clock.Now()).reqs++
	r.mu.Unlock()
	r.reqs.Add(1)
}

// Retry grants a retry while the window allows one more, and counts it.
func (r *LateTotalRatio) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	r.mu.Lock()
	s := r.currentLocked(r.clock.Now())
	ok := r.retries.Load() < ratioLimit(r.m, r.reqs.Load())
	if ok {
		s.retries++
	}
	r.mu.Unlock()
	if ok {
		hook("latetotal.unlocked")
		r.retries.Add(1)
	}
	return ok
}

// Success does nothing: a ratio recovers as its window slides.
func (r *LateTotalRatio) Success(budget.Kind) {}

// Available returns the retries the window would still grant now, from the
// slots.
func (r *LateTotalRatio) Available() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.head
	if now := r.clock.Now(); now > r.last {
		h = floorDiv(int64(now), r.width)
	}
	size := uint64(len(r.slots))
	var reqs, retries int64
	for _, s := range r.slots {
		if uint64(h)-uint64(s.n) < size && uint64(r.head)-uint64(s.n) < size {
			reqs += s.reqs
			retries += s.retries
		}
	}
	limit := ratioLimit(r.m, reqs)
	if retries >= limit {
		return 0
	}
	return float64(limit - retries)
}
