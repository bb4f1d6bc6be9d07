package unseen

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// CowRatio is a correct sliding-window ratio budget (model.Ratio) built
// copy-on-write: its whole state is an immutable value behind an
// atomic.Pointer. A call loads the state, reads the clock, computes the
// next state in a fresh copy, and publishes it by compare-and-swap of the
// pointer, starting over from a fresh load when another call published
// first. A state is never changed once published, so a call decides on one
// consistent snapshot and takes effect at its successful swap. A call that
// changes nothing (a denied retry in the same instant) publishes nothing.
type CowRatio struct {
	m     model.Ratio
	width int64
	clock budget.Clock
	state atomic.Pointer[cowState]
}

// cowState is one immutable state of a CowRatio.
type cowState struct {
	last          time.Duration
	head          int64
	reqs, retries int64
	slots         []slotCount // never written after publication
}

// NewCowRatio returns an empty window following m, on clock.
func NewCowRatio(m model.Ratio, clock budget.Clock) *CowRatio {
	r := &CowRatio{m: m, width: int64(m.Window) / m.Slots, clock: clock}
	now := clock.Now()
	s := &cowState{last: now, head: floorDiv(int64(now), r.width), slots: make([]slotCount, m.Slots)}
	for i := range s.slots {
		s.slots[i].n = s.head - m.Slots
	}
	r.state.Store(s)
	return r
}

// next returns a private copy of s slid to now, and the index of now's
// slot in it.
func (r *CowRatio) next(s *cowState, now time.Duration) (*cowState, int) {
	n := &cowState{last: s.last, head: s.head, reqs: s.reqs, retries: s.retries, slots: slices.Clone(s.slots)}
	size := uint64(len(n.slots))
	if now > n.last {
		n.last = now
		h := floorDiv(int64(now), r.width)
		if uint64(h)-uint64(n.head) >= size {
			n.reqs, n.retries, n.head = 0, 0, h
		} else {
			for n.head != h {
				n.head++
				sl := &n.slots[floorMod(n.head, int64(size))]
				if uint64(n.head-1)-uint64(sl.n) < size {
					n.reqs -= sl.reqs
					n.retries -= sl.retries
				}
				*sl = slotCount{n: n.head}
			}
		}
	}
	i := int(floorMod(n.head, int64(size)))
	if n.slots[i].n != n.head {
		n.slots[i] = slotCount{n: n.head}
	}
	return n, i
}

// Request counts a request.
func (r *CowRatio) Request() {
	for {
		old := r.state.Load()
		n, i := r.next(old, r.clock.Now())
		n.slots[i].reqs++
		n.reqs++
		if r.state.CompareAndSwap(old, n) {
			return
		}
	}
}

// Retry grants a retry while the window allows one more, and counts it.
func (r *CowRatio) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	for {
		old := r.state.Load()
		now := r.clock.Now()
		n, i := r.next(old, now)
		ok := n.retries < ratioLimit(r.m, n.reqs)
		if ok {
			n.slots[i].retries++
			n.retries++
		} else if now <= old.last {
			// Nothing to publish. The snapshot held from the load through
			// the clock reading if the pointer is still the same (states
			// are never reused, so there is no ABA): deny on it.
			if r.state.Load() == old {
				return false
			}
			continue
		}
		if r.state.CompareAndSwap(old, n) {
			return ok
		}
	}
}

// Success does nothing: a ratio recovers as its window slides.
func (r *CowRatio) Success(budget.Kind) {}

// Available returns the retries the window would still grant now.
func (r *CowRatio) Available() float64 {
	s := r.state.Load()
	n, _ := r.next(s, r.clock.Now())
	limit := ratioLimit(r.m, n.reqs)
	if n.retries >= limit {
		return 0
	}
	return float64(limit - n.retries)
}
