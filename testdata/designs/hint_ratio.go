package designs

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

// HintRatio is a sliding-window ratio budget kept in a ring of slots under
// a mutex, with a lock-free fast path for the common answer of an
// exhausted budget: a denial. Every call that takes the mutex publishes,
// before unlocking, an immutable hint (the latest clock reading seen, the
// slot it falls in, and whether the next retry would be denied there); it
// first withdraws the hint (stores nil) right after locking, before it
// reads the clock. A Retry that finds a hint saying "full" reads the
// clock, and denies at once if the reading, taken as the later of itself
// and the hint's reading, falls in the hint's slot, and the hint is still
// the published one when reloaded. Anything else takes the mutex and does
// the full work.
//
// Linearizability: calls under the mutex are linearized at their clock
// read, as in a plain mutex budget. For a fast denial, the two loads of
// the hint return the same non-nil pointer (hints are fresh allocations,
// kept alive by the reader, so there is no ABA), so no store happened
// between them; a locked call's clock read lies between its withdrawal
// and its publication, both stores, and the first load would have seen
// nil had one been in progress. So no locked call is linearized between
// the loads, the state then is the one the hint describes, and the fast
// denial is linearized at its clock read. The model would observe that
// reading and deny (the window did not slide: same slot, nothing
// expires). Its new Seen is not stored, but a Seen that stays in the same
// slot behaves identically: the budget depends on Seen only through the
// slot of max(now, Seen), and every reading between two instants of one
// slot is in that slot.
type HintRatio struct {
	cfg   RatioConfig
	clock budget.Clock

	hint atomic.Pointer[ratioHint] // nil while a locked call is in progress

	mu   sync.Mutex
	seen time.Duration // latest clock reading seen
	ring []ringSlot    // slot n lives at index n mod Slots
}

var _ budget.Budget = (*HintRatio)(nil)

// ratioHint is what a lock-free denial may rely on. It is never changed
// after it is published.
type ratioHint struct {
	seen time.Duration
	head int64 // the slot of seen
	full bool  // the next retry in slot head would be denied
}

// ringSlot holds the counts of slot n.
type ringSlot struct {
	n       int64
	reqs    int64
	retries int64
}

// NewHintRatio returns an empty HintRatio on clock, which must be non-nil.
func NewHintRatio(cfg RatioConfig, clock budget.Clock) *HintRatio {
	r := &HintRatio{cfg: cfg, clock: clock, ring: make([]ringSlot, cfg.Slots)}
	r.seen = clock.Now()
	h := cfg.slot(r.seen)
	for i := range r.ring {
		// A slot number that is out of the window at h and at every later
		// head, so that every entry reads as empty.
		r.ring[i].n = h - cfg.Slots
	}
	r.publish(h)
	return r
}

// totals returns the requests and retries in the window whose newest slot
// is h. r.mu must be held.
func (r *HintRatio) totals(h int64) (reqs, retries int64) {
	for i := range r.ring {
		if s := &r.ring[i]; r.cfg.inWindow(s.n, h) {
			reqs += s.reqs
			retries += s.retries
		}
	}
	return reqs, retries
}

// current returns the entry of slot h, emptying an entry that holds an
// older slot. r.mu must be held.
func (r *HintRatio) current(h int64) *ringSlot {
	s := &r.ring[floorMod(h, r.cfg.Slots)]
	if s.n != h {
		*s = ringSlot{n: h}
	}
	return s
}

// publish stores a fresh hint for the state at head h. r.mu must be held.
func (r *HintRatio) publish(h int64) {
	reqs, retries := r.totals(h)
	r.hint.Store(&ratioHint{seen: r.seen, head: h, full: !r.cfg.grants(reqs, retries)})
}

// enter locks, withdraws the hint, observes the clock and returns the head
// slot.
func (r *HintRatio) enter() int64 {
	r.mu.Lock()
	r.hint.Store(nil)
	r.seen = later(r.seen, r.clock.Now())
	return r.cfg.slot(r.seen)
}

// leave publishes the hint for head h and unlocks.
func (r *HintRatio) leave(h int64) {
	r.publish(h)
	r.mu.Unlock()
}

// Request counts a request in the current slot.
func (r *HintRatio) Request() {
	h := r.enter()
	r.current(h).reqs++
	r.leave(h)
}

// Retry reports whether one more retry keeps the window within its limit,
// and counts it if so. A kind that is not a retry kind is denied and
// counted nowhere.
func (r *HintRatio) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	if h := r.hint.Load(); h != nil && h.full {
		now := later(h.seen, r.clock.Now())
		if r.cfg.slot(now) == h.head && r.hint.Load() == h {
			return false
		}
	}
	h := r.enter()
	defer r.leave(h)
	reqs, retries := r.totals(h)
	if !r.cfg.grants(reqs, retries) {
		return false
	}
	r.current(h).retries++
	return true
}

// Success does nothing: the budget recovers as its window slides.
func (r *HintRatio) Success(budget.Kind) {}

// Available returns how many more retries the window would grant as of the
// clock's reading now; it changes nothing.
func (r *HintRatio) Available() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.cfg.slot(later(r.seen, r.clock.Now()))
	reqs, retries := r.totals(h)
	return r.cfg.available(reqs, retries)
}
