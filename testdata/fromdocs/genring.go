package fromdocs

import (
	"sync"
	"time"

	"github.com/retrybudget/retrybudget/budget"
	"github.com/retrybudget/retrybudget/model"
)

// ringSize is the number of slots of a GenRing, fixed at compile time.
const ringSize = 10

// GenModel is the rule GenRing follows: half the requests of a 100 ms
// window (10 slots of 10 ms), plus a reserve of 2, and at least 6.
var GenModel = model.Ratio{PPM: 500_000, Window: 100 * time.Millisecond, Slots: ringSize, Floor: 6, Reserve: 2}

// genSlot holds the counts of slot number gen×ringSize + its index.
type genSlot struct {
	gen           int64 // generation: the lap of the ring the counts belong to
	reqs, retries int64
}

// GenRing is a sliding-window ratio budget (model.Ratio) kept in a ring
// of ringSize slots, each tagged with its generation (the lap of the ring
// it was last written in), plus running totals of the window, under one
// sync.Mutex. A cell whose tag is not the current slot's is stale and is
// cleared when it is reused; moving the head subtracts from the totals
// each cell that leaves the window, and a gap of a whole window or more
// zeroes them.
//
// Linearizability: Request and Retry hold mu for their whole duration and
// read the clock inside it, so they are totally ordered and each takes
// effect inside its critical section on the reading it took there.
// Available holds mu too and changes nothing.
type GenRing struct {
	ppm, floor, reserve, width int64
	clock                      budget.Clock

	mu            sync.Mutex
	seen          time.Duration
	head          int64 // slot number of seen
	ring          [ringSize]genSlot
	reqs, retries int64 // totals of the window whose head is head
}

// NewGenRing returns an empty budget following m (with m.Slots ==
// ringSize), on clock c.
func NewGenRing(m model.Ratio, c budget.Clock) *GenRing {
	if m.Slots != ringSize {
		panic("fromdocs: GenRing has 10 slots")
	}
	r := &GenRing{ppm: m.PPM, floor: m.Floor, reserve: m.Reserve, width: int64(m.Window) / ringSize, clock: c, seen: c.Now()}
	r.head = floorDiv(int64(r.seen), r.width)
	return r
}

// slotOf returns the slot number whose counts cell i holds.
func (r *GenRing) slotOf(i int) int64 { return r.ring[i].gen*ringSize + int64(i) }

// inWindow reports whether slot n is in the window whose head is h.
func inWindow(n, h int64) bool { return uint64(h)-uint64(n) < ringSize }

// currentLocked observes the clock, moves the head, and returns the cell
// of the head slot.
func (r *GenRing) currentLocked() *genSlot {
	var moved uint64
	if r.seen, moved = observe(r.seen, r.clock.Now()); moved > 0 {
		h := floorDiv(int64(r.seen), r.width)
		if gap := uint64(h) - uint64(r.head); gap >= ringSize {
			r.reqs, r.retries = 0, 0
		} else {
			for k := r.head + 1; k != h+1; k++ {
				i := int(floorMod(k, ringSize))
				if inWindow(r.slotOf(i), r.head) {
					r.reqs -= r.ring[i].reqs
					r.retries -= r.ring[i].retries
				}
				r.ring[i] = genSlot{gen: floorDiv(k, ringSize)}
			}
		}
		r.head = h
	}
	i := int(floorMod(r.head, ringSize))
	if g := floorDiv(r.head, ringSize); r.ring[i].gen != g {
		// stale cell (after a gap of a window or more): already out of
		// the totals
		r.ring[i] = genSlot{gen: g}
	}
	return &r.ring[i]
}

// Request counts a request in the current slot.
func (r *GenRing) Request() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.currentLocked().reqs++
	r.reqs++
}

// Retry grants and counts a retry when the window allows one more.
func (r *GenRing) Retry(kind budget.Kind) bool {
	if !kind.IsRetry() {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.currentLocked()
	if !ratioGrants(r.ppm, r.floor, r.reserve, r.reqs, r.retries) {
		return false
	}
	c.retries++
	r.retries++
	return true
}

// Success does nothing.
func (r *GenRing) Success(budget.Kind) {}

// Available returns how many more retries the window would grant now. It
// changes nothing.
func (r *GenRing) Available() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	reqs, retries := r.reqs, r.retries
	if seen, moved := observe(r.seen, r.clock.Now()); moved > 0 {
		h := floorDiv(int64(seen), r.width)
		reqs, retries = 0, 0
		for i := range r.ring {
			if inWindow(r.slotOf(i), h) && inWindow(r.slotOf(i), r.head) {
				reqs += r.ring[i].reqs
				retries += r.ring[i].retries
			}
		}
	}
	return ratioLeft(r.ppm, r.floor, r.reserve, reqs, retries)
}
