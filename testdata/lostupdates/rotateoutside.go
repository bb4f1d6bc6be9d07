package lostupdates

import (
	"sync"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

// RotateOutsideLockRatio is the Google SRE book's ratio budget
// (model.SRE(): retries may be 10% of requests over a 10 s window kept in
// 10 slots, and at least 3 retries are always allowed): a ring of slots
// with running totals, guarded by a mutex. Rotating the window (expiring
// the slots the clock has moved past) is done by rotate() before the lock
// is taken, since it is a no-op on all but one call per slot width and the
// team wanted the critical section to be just the counting.
//
// BUG: rotate() reads and writes the ring (last, head, the slots and the
// totals) without holding the mutex: two calls that cross into a new slot
// at once expire the same slots twice, and a rotation interleaved with a
// counting call loses or double-counts requests and retries.
type RotateOutsideLockRatio struct {
	clock budget.Clock
	mu    sync.Mutex
	ring  ratioRing
}

// NewRotateOutsideLockRatio returns an empty window on clock: ppm parts per
// million of the requests in the window, at least floor retries.
func NewRotateOutsideLockRatio(ppm int64, window time.Duration, slots int, floor int64, clock budget.Clock) *RotateOutsideLockRatio {
	return &RotateOutsideLockRatio{clock: clock, ring: newRatioRing(ppm, window, slots, floor, clock.Now())}
}

// rotate brings the window up to the clock reading now.
func (r *RotateOutsideLockRatio) rotate(now time.Duration) { r.ring.rotate(now) }

// Request counts a request in the current slot.
func (r *RotateOutsideLockRatio) Request() {
	r.rotate(r.clock.Now())
	r.mu.Lock()
	r.ring.slot().reqs++
	r.ring.reqs++
	r.mu.Unlock()
}

// Retry grants a retry while the window allows one more, and counts it.
func (r *RotateOutsideLockRatio) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	r.rotate(r.clock.Now())
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.ring.slot()
	if r.ring.denies() {
		return false
	}
	s.retries++
	r.ring.retries++
	return true
}

// Success does nothing: the window recovers as it slides.
func (r *RotateOutsideLockRatio) Success(budget.Kind) {}

// Available returns how many more retries the window would grant now.
func (r *RotateOutsideLockRatio) Available() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ring.available(r.clock.Now())
}
