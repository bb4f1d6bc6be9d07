package lostupdates

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

// LazyRingRatio is the SRE ratio budget (model.SRE()) for a keyed set of
// budgets where most keys are never retried: the constructor only records
// the configuration and the clock's reading, and the window (its ring of
// slots and its mutex) is allocated on the first call and published in an
// atomic.Pointer, so an idle key costs a few words. Every call after the
// first is one atomic load and the window's mutex.
//
// BUG: the lazy initialization is Load, then Store of a new window, not
// sync.Once or a CompareAndSwap: two first calls at once each allocate a
// window, each count in their own, and the window stored last replaces the
// other, with the requests and retries counted in it.
type LazyRingRatio struct {
	clock  budget.Clock
	start  time.Duration
	ppm    int64
	width  time.Duration
	slots  int
	floor  int64
	window atomic.Pointer[lazyWindow]
}

type lazyWindow struct {
	mu   sync.Mutex
	ring ratioRing
}

// NewLazyRingRatio returns an empty window on clock: ppm parts per million
// of the requests in the window, at least floor retries.
func NewLazyRingRatio(ppm int64, window time.Duration, slots int, floor int64, clock budget.Clock) *LazyRingRatio {
	return &LazyRingRatio{clock: clock, start: clock.Now(), ppm: ppm, width: window, slots: slots, floor: floor}
}

// get returns the window, allocating it on first use.
func (r *LazyRingRatio) get() *lazyWindow {
	if w := r.window.Load(); w != nil {
		return w
	}
	w := &lazyWindow{ring: newRatioRing(r.ppm, r.width, r.slots, r.floor, r.start)}
	r.window.Store(w)
	return w
}

// Request counts a request in the current slot.
func (r *LazyRingRatio) Request() {
	now := r.clock.Now()
	w := r.get()
	w.mu.Lock()
	w.ring.current(now).reqs++
	w.ring.reqs++
	w.mu.Unlock()
}

// Retry grants a retry while the window allows one more, and counts it.
func (r *LazyRingRatio) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	now := r.clock.Now()
	w := r.get()
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.ring.current(now)
	if w.ring.denies() {
		return false
	}
	s.retries++
	w.ring.retries++
	return true
}

// Success does nothing: the window recovers as it slides.
func (r *LazyRingRatio) Success(budget.Kind) {}

// Available returns how many more retries the window would grant now.
func (r *LazyRingRatio) Available() float64 {
	now := r.clock.Now()
	w := r.window.Load()
	if w == nil {
		ring := newRatioRing(r.ppm, r.width, r.slots, r.floor, r.start)
		return ring.available(now)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ring.available(now)
}
