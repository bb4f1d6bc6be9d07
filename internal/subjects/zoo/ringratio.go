package zoo

import (
	"math/bits"
	"sync"
	"time"

	"github.com/retrybudget/retrybudget/budget"
)

// floorDiv returns ⌊a/b⌋ for b > 0, for negative a too.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// floorMod returns a mod b in [0, b) for b > 0.
func floorMod(a, b int64) int64 {
	r := a % b
	if r < 0 {
		r += b
	}
	return r
}

// ratioAllows reports whether one more retry fits: retries+1 is at most
// max(floor, ⌊ppm × requests / 1e6⌋), computed in 128 bits.
func ratioAllows(requests, retries, ppm, floor int64) bool {
	next := retries + 1
	if next <= floor {
		return true
	}
	hi, lo := bits.Mul64(uint64(requests), uint64(ppm))
	allowed, _ := bits.Div64(hi, lo, 1_000_000) // hi < 1e6 for any sane count
	return uint64(next) <= allowed
}

type ringSlot struct {
	slot     int64 // which slot of time this entry holds
	live     bool  // whether it holds anything at all
	requests int64
	retries  int64
}

// RingRatio is a sliding-window ratio budget: a ring with one entry per slot
// of the window, each tagged with the slot number it currently holds, under
// a sync.Mutex. An entry whose tag has left the window is stale and is
// ignored when summing, and overwritten when its index comes round again.
type RingRatio struct {
	ppm, floor int64
	width      int64
	n          int64
	clock      budget.Clock

	mu   sync.Mutex
	seen int64
	ring []ringSlot
}

// NewRingRatio returns an empty ratio budget: ppm parts per million of the
// requests over window, cut into slots, with at least floor retries.
func NewRingRatio(ppm int64, window time.Duration, slots, floor int64, clock budget.Clock) *RingRatio {
	return &RingRatio{
		ppm: ppm, floor: floor, width: int64(window) / slots, n: slots, clock: clock,
		seen: int64(clock.Now()), ring: make([]ringSlot, slots),
	}
}

// head reads the clock and returns the current slot number. r.mu is held.
func (r *RingRatio) head() int64 {
	if now := int64(r.clock.Now()); now > r.seen {
		r.seen = now
	}
	return floorDiv(r.seen, r.width)
}

// inWindow reports whether slot s is one of the n slots ending at head h.
func (r *RingRatio) inWindow(s, h int64) bool {
	return uint64(h)-uint64(s) < uint64(r.n) // s <= h always
}

// entry returns the ring entry for slot h, cleared if it held an older slot.
func (r *RingRatio) entry(h int64) *ringSlot {
	e := &r.ring[floorMod(h, r.n)]
	if !e.live || e.slot != h {
		*e = ringSlot{slot: h, live: true}
	}
	return e
}

func (r *RingRatio) Request() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entry(r.head()).requests++
}

func (r *RingRatio) Retry(k budget.Kind) bool {
	if !k.IsRetry() {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.head()
	var reqs, rets int64
	for i := range r.ring {
		if e := &r.ring[i]; e.live && r.inWindow(e.slot, h) {
			reqs += e.requests
			rets += e.retries
		}
	}
	if !ratioAllows(reqs, rets, r.ppm, r.floor) {
		return false
	}
	r.entry(h).retries++
	return true
}

func (r *RingRatio) Success(budget.Kind) {}
