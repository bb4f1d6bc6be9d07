package designs

import (
	"sync"
	"sync/atomic"

	"github.com/retrybudget/retrybudget/budget"
)

// EpochRatio is a sliding-window ratio budget whose window slides when it
// is read ("rotate on read", no ticker), and whose most frequent call, a
// Request in the current slot, runs under the read lock of a sync.RWMutex,
// many at once.
//
// The budget keeps the head of its window, the slot of the latest clock
// reading seen, in an atomic, and a ring of Slots entries: entry i counts
// the requests (atomically) and retries of the one slot n ≡ i (mod Slots)
// with head - Slots < n <= head. The head is all the budget needs of the
// latest reading: a slot is floor(t / width), a monotone function of t, so
// the slot of later(seen, now) is the larger of the slot of seen and the
// slot of now.
//
//   - Request takes the read lock, reads the clock, and when the reading's
//     slot is not after the head (an atomic load, which the read lock makes
//     stable: the head changes only under the write lock) adds one to the
//     head's entry with an atomic add. Otherwise it lets the read lock go
//     and takes the slow path: under the write lock it reads the clock
//     again, rotates the ring to the later head (clearing the entries of
//     the slots it passes, all of them after a gap of a window or more)
//     and counts the request there.
//   - Retry takes the write lock, reads the clock, rotates, sums every
//     entry (all are in the window by the ring's invariant) and decides.
//   - Available takes the write lock and sums, without rotating, the
//     entries still in the window at the later of the head and the
//     reading's slot.
//
// Linearizability: the head and the retries change only under the write
// lock, and the requests under the write lock or, by atomic adds to the
// head's entry, under the read lock. A write-locked call excludes every
// other call and is linearized at its clock read. A fast Request is
// linearized at its clock read: the head is constant while it holds the
// read lock, its reading's slot is at most the head, so the model would
// act in the head's slot (the window does not move) and count one request
// there, as the add does; the only calls that can overlap it are other
// fast Requests, which make the same change to the same slot and commute
// with it, and its add is done before it lets the read lock go, so every
// write-locked call after it sees it.
type EpochRatio struct {
	cfg   RatioConfig
	clock budget.Clock

	mu      sync.RWMutex
	head    atomic.Int64   // slot of the latest reading seen; written under mu's write lock
	reqs    []atomic.Int64 // per ring entry; added to under mu's read lock
	retries []int64        // per ring entry; under mu's write lock
}

var _ budget.Budget = (*EpochRatio)(nil)

// NewEpochRatio returns an empty EpochRatio on clock, which must be
// non-nil.
func NewEpochRatio(cfg RatioConfig, clock budget.Clock) *EpochRatio {
	r := &EpochRatio{
		cfg:     cfg,
		clock:   clock,
		reqs:    make([]atomic.Int64, cfg.Slots),
		retries: make([]int64, cfg.Slots),
	}
	r.head.Store(cfg.slot(clock.Now()))
	return r
}

// index returns the ring entry of slot n.
func (r *EpochRatio) index(n int64) int64 { return floorMod(n, r.cfg.Slots) }

// rotate moves the head to the later of itself and the slot of the clock
// reading now, clearing the entries of the slots it passes, and returns
// the new head. mu's write lock must be held.
func (r *EpochRatio) rotate() int64 {
	old := r.head.Load()
	h := max(old, r.cfg.slot(r.clock.Now()))
	gap := uint64(h) - uint64(old) // the true distance, even past 2^63
	if gap == 0 {
		return h
	}
	if gap >= uint64(r.cfg.Slots) {
		for i := range r.reqs {
			r.reqs[i].Store(0)
			r.retries[i] = 0
		}
	} else {
		first := r.index(old)
		for j := int64(1); j <= int64(gap); j++ {
			i := (first + j) % r.cfg.Slots
			r.reqs[i].Store(0)
			r.retries[i] = 0
		}
	}
	r.head.Store(h)
	return h
}

// Request counts a request in the current slot.
func (r *EpochRatio) Request() {
	r.mu.RLock()
	if h := r.head.Load(); r.cfg.slot(r.clock.Now()) <= h {
		r.reqs[r.index(h)].Add(1)
		r.mu.RUnlock()
		return
	}
	r.mu.RUnlock()

	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs[r.index(r.rotate())].Add(1)
}

// Retry reports whether one more retry keeps the window within its limit,
// and counts it if so. A kind that is not a retry kind is denied and
// counted nowhere.
func (r *EpochRatio) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.rotate()
	var reqs, retries int64
	for i := range r.reqs {
		reqs += r.reqs[i].Load()
		retries += r.retries[i]
	}
	if !r.cfg.grants(reqs, retries) {
		return false
	}
	r.retries[r.index(h)]++
	return true
}

// Success does nothing: the budget recovers as its window slides.
func (r *EpochRatio) Success(budget.Kind) {}

// Available returns how many more retries the window would grant as of the
// clock's reading now; it changes nothing.
func (r *EpochRatio) Available() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	head := r.head.Load()
	h := max(head, r.cfg.slot(r.clock.Now()))
	gap := uint64(h) - uint64(head)
	var reqs, retries int64
	if gap < uint64(r.cfg.Slots) {
		first := r.index(head)
		for i := range r.reqs {
			// Entry i holds slot head - behind, behind in [0, Slots).
			behind := floorMod(first-int64(i), r.cfg.Slots)
			if gap+uint64(behind) < uint64(r.cfg.Slots) {
				reqs += r.reqs[i].Load()
				retries += r.retries[i]
			}
		}
	}
	return r.cfg.available(reqs, retries)
}
