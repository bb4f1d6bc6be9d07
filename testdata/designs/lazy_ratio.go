package designs

import (
	"sync"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

// LazyRatio is a sliding-window ratio budget that builds its ring of slots
// only when it is first used, by sync.Once, so that a budget made for a
// dependency that is never called costs one small struct. The constructor
// reads the clock once and keeps the reading: the window the budget starts
// on is the one of its construction, as the model's InitAt says, not the
// one of its first call (a clock stepped back between the two must not
// move the budget's start back with it). After the Once, a sync.Mutex
// guards the ring and the latest reading seen.
//
// Linearizability: once.Do returns only after init has run to completion,
// in the one call that ran it, and the Once makes that completion happen
// before every Do's return, so every call finds the ring built, as the
// constructor would have built it; init changes no behaviour, only when
// memory is allocated. After that, every call that reads the clock holds
// mu from its clock read to its last write, so calls are serialized by mu
// and each is linearized at its clock read. A retry of a kind that is not
// a retry kind, and Success, touch nothing.
type LazyRatio struct {
	cfg   RatioConfig
	clock budget.Clock
	start time.Duration // the clock's reading at construction

	once sync.Once
	mu   sync.Mutex
	st   slotRing // built by init; guarded by mu
}

var _ budget.Budget = (*LazyRatio)(nil)

// NewLazyRatio returns an empty LazyRatio on clock, which must be non-nil.
// It reads the clock once and allocates nothing else.
func NewLazyRatio(cfg RatioConfig, clock budget.Clock) *LazyRatio {
	return &LazyRatio{cfg: cfg, clock: clock, start: clock.Now()}
}

// init builds the ring: an empty window on the clock reading of the
// construction.
func (r *LazyRatio) init() { r.st = r.cfg.newSlotRing(r.start) }

// lock makes sure the ring is built, and locks it.
func (r *LazyRatio) lock() {
	r.once.Do(r.init)
	r.mu.Lock()
}

// Request counts a request in the current slot.
func (r *LazyRatio) Request() {
	r.lock()
	defer r.mu.Unlock()
	r.cfg.request(&r.st, r.clock.Now())
}

// Retry reports whether one more retry keeps the window within its limit,
// and counts it if so. A kind that is not a retry kind is denied and
// counted nowhere.
func (r *LazyRatio) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	r.lock()
	defer r.mu.Unlock()
	return r.cfg.retry(&r.st, r.clock.Now())
}

// Success does nothing: the budget recovers as its window slides.
func (r *LazyRatio) Success(budget.Kind) {}

// Available returns how many more retries the window would grant as of the
// clock's reading now; it changes nothing (but may build the ring).
func (r *LazyRatio) Available() float64 {
	r.lock()
	defer r.mu.Unlock()
	return r.cfg.availableAt(&r.st, r.clock.Now())
}
